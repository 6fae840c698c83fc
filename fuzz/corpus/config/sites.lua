listen = "[::1]:8000"
backends = { "127.0.0.1:8001" }
sites = {
  ["www.example.com"] = { backends = { "127.0.0.1:8002", "[::1]:8003" }, balance = "least_conn" },
  ["*.example.com"] = { backends = { "localhost:8004" } },
  ["Blog.Example.ORG."] = { backends = { "127.0.0.1:8005" } },
}
max_request_line = 4096
max_request_head = 16384
down_time = 0.5
