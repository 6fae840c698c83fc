-- rsp deciding per request, in Lua (chapter 07). Copy it, change the
-- addresses and names, and run: rsp routing.lua
listen = 80                 -- every address, IPv6 and IPv4

-- Named pools of backends. A site or route() picks one by name.
pools = {
  app    = { backends = { "127.0.0.1:8080", "127.0.0.1:8081" }, balance = "least_conn" },
  static = { backends = { "127.0.0.1:8082" } },
}

-- Virtual hosts may name a pool instead of listing backends. They are used
-- for the requests route() leaves alone (returns nil).
sites = {
  ["blog.example.com"] = { pool = "app" },
}

-- Called once per request, with req.method, req.path (normalized: no
-- "..", "//" or needless %-escapes), req.query, req.host (lower case, no
-- port), req.client (the client's IP address), req.headers (lower-case
-- names). Return a pool name, a response for rsp to send itself, or nil.
-- It may run for route_time_limit seconds (0.1 by default); past that, or
-- on any error, that one request gets a 500 and the log says why.
function route(req)
  if req.host == "example.com" then    -- one name for the site: send visitors to www
    local query = req.query ~= "" and "?" .. req.query or ""
    return { status = 301, location = "https://www.example.com" .. req.path .. query }
  end
  if req.path:find("^/admin") and req.client ~= "127.0.0.1" then
    return { status = 403 }
  end
  if req.path:find("^/static/") or req.path == "/favicon.ico" then
    return "static"
  end
  if req.host == "blog.example.com" then
    return nil                          -- sites decide: blog.example.com -> app
  end
  return "app"
end
