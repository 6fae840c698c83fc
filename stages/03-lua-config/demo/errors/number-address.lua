listenPort = 8000
backendAddress = 127001
backendPort = 9001
