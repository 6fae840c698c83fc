listen = 8000
backends = { "127.0.0.1:8001", "no-such-host.invalid:8002" }
