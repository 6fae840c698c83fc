listen = 8000
backends = { "127.0.0.1:80010" }
