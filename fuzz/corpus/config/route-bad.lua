listen = "127.0.0.1:8000"
route = function(req)
  local n = #req.target
  if n % 7 == 0 then error("boom") end
  if n % 7 == 1 then while true do end end
  if n % 7 == 2 then return { status = 200, headers = { ["X-A"] = "a\r\nb" } } end
  if n % 7 == 3 then return { status = "x" } end
  if n % 7 == 4 then return "nope" end
  if n % 7 == 5 then return { status = 304, body = "x" } end
  return coroutine.yield()
end
