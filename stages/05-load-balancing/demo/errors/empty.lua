listen = 8000
backends = {}
