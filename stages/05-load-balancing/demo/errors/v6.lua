listen = 8000
backends = { "::1:8001" }
