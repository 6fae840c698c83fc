listenPort = true
backendAddress = "127.0.0.1"
backendPort = 9001
