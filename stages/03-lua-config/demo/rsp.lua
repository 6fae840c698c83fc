-- rsp.lua: listen on 8000, forward every connection to a local web server.
listenPort = 8000
backendAddress = "127.0.0.1"
backendPort = 9001
