-- rsp.lua: a default site and two named ones (demo/backend.py alpha 8001,
-- bravo 8002, charlie 8003).
listen = 8000
backends = { "127.0.0.1:8001" }          -- the default site
sites = {
  ["www.example.com"] = { backends = { "127.0.0.1:8002" } },
  ["*.example.com"]   = { backends = { "127.0.0.1:8003" } },
}
