listen = 8080
sites = { ["a.test"] = { backends = { "127.0.0.1:1" } } }
