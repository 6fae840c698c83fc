-- The demo configuration that `make run` uses: rsp listens on port 8000
-- (on this machine only) and forwards every connection to the demo site on
-- 127.0.0.1:8001. Copy it and change the backends to put rsp in front of
-- your own server.
listen = "127.0.0.1:8000"
backends = { "127.0.0.1:8001" }
