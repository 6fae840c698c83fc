listen = 8000

pools = {
  app    = { backends = { "127.0.0.1:8001", "127.0.0.1:8002" }, balance = "least_conn" },
  static = { backends = { "127.0.0.1:8003" } },
}

sites = {
  ["www.example.com"] = { pool = "app" },
}

function route(req)
  -- One name for the site: send the bare domain to www, keeping the rest.
  if req.host == "example.com" then
    return { status = 301, location = "http://www.example.com" .. req.target }
  end
  -- The admin pages are for the office only.
  if (req.path == "/admin" or req.path:find("^/admin/")) and req.client ~= "192.0.2.10" then
    return { status = 403 }
  end
  -- A health check that never bothers a backend.
  if req.path == "/ping" then
    return { status = 200, body = "pong\n" }
  end
  if req.path:find("^/static/") then
    return "static"
  end
  return nil    -- route by Host, as in chapter 06
end
