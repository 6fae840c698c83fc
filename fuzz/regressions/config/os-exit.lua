os.exit(3)
listen = 8000
backends = { "127.0.0.1:8001" }
