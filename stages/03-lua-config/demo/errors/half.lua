listenPort = 8000.5
backendAddress = "127.0.0.1"
backendPort = 9001
