listen = 8000
pools = { ["my app"] = { backends = { "127.0.0.1:8001" } } }
