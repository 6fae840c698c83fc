listen = 8050
pools = { php = { backends = { "127.0.0.1:8003" } } }

function route(req)
  if req.path == "/rep" then local s = string.rep("x", 2e8) return { status = 200, body = #s .. "\n" } end
  if req.path == "/pattern" then
    local found = string.find(string.rep("a", 40), string.rep("a*", 6) .. "b")
    return { status = 200, body = tostring(found) .. "\n" }
  end
  if req.path == "/jit" then jit.on() end
  if req.path == "/unhook" then debug.sethook() end
  if req.path:match("^/(.*)/(.*)/(.*)%.php$") then return "php" end
  return { status = 404 }
end
