-- rsp.lua: three backends, taken in turn.
listen = 8000                      -- a port, or "ADDRESS:PORT" (IPv6 as "[::1]:8000")
backends = { "127.0.0.1:8001", "127.0.0.1:8002", "localhost:8003" }
balance = "round_robin"            -- or "least_conn" (optional; default round_robin)
down_time = 5                      -- seconds a backend whose connect failed is skipped (optional)
