listen = 8000
sites = { ["example.com.."] = { backends = { "127.0.0.1:8002" } } }
