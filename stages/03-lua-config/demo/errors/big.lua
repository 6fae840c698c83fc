listenPort = 8000
backendAddress = "127.0.0.1"
backendPort = 70000
