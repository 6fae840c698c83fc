listen = 8000
pools = { app = { backends = { "127.0.0.1:8001" }, balanse = "least_conn" } }
