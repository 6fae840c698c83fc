listen = 8000
backends = { "127.0.0.1:8001" }
function route(req) return nil end
route_time_limit = 30
