-- a stage 03 config
listenPort = 8000
backendAddress = "127.0.0.1"
backendPort = 8001
