listen = 8000
pools = {
  app = { backends = { "127.0.0.1:8001", "127.0.0.1:8002" }, balance = "least_conn" },
  static = { backends = { "127.0.0.1:8003" } },
}
sites = { ["www.example.com"] = { pool = "app" }, ["img.example.com"] = { backends = { "127.0.0.1:8004" } } }
route_time_limit = 0.05
function route(req)
  if req.path:find("^/static/") then return "static" end
  if req.host == "old.example.com" then return { status = 301, location = "https://new.example.com" .. req.path } end
  if req.headers["x-blocked"] then return { status = 403 } end
  if req.method == "HEAD" then return { status = 200, body = "hi", headers = { ["Set-Cookie"] = { "a=1", "b=2" }, ["X-N"] = 5 } } end
  if req.query ~= "" then return { status = 204 } end
  if req.client == "192.0.2.1" and req.version == "1.1" then return "app" end
  return nil
end
