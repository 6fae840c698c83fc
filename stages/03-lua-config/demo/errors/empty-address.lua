listenPort = 8000
backendAddress = ""
backendPort = 9001
