listenPort = 8000
backendAddress = pickBackend()
backendPort = 9001
