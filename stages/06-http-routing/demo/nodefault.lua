-- nodefault.lua: no default site; the longest wildcard wins.
listen = 8010
sites = {
  ["www.example.com"]  = { backends = { "127.0.0.1:8002" } },
  ["*.example.com"]    = { backends = { "127.0.0.1:8003" } },
  ["*.eu.example.com"] = { backends = { "127.0.0.1:8001" } },
}
