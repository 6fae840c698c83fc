listen = "127.0.0.1:8080"
backends = { "unix:/run/app.sock", "127.0.0.1:8081" }
pools = { a = { backends = { "unix:relative.sock" } }, b = { backends = { "unix:" } } }
sites = { ["x.example"] = { backends = { "unix:/run/app.sock", "unix:/run/app.sock" } } }
