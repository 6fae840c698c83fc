listen = 8000
pools = { app = { backends = { "127.0.0.1:8001" } } }
sites = { ["www.example.com"] = { pool = "ap" } }
