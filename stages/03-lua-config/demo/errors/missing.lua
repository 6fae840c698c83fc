listenPort = 8000
backendPort = 9001
