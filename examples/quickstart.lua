-- The demo configuration that `make run` uses: rsp listens on port 8000
-- and forwards every connection to the demo site on 127.0.0.1:8001.
-- Copy it and change the backend to put rsp in front of your own server.
listenPort = 8000
backendAddress = "127.0.0.1"
backendPort = 8001
