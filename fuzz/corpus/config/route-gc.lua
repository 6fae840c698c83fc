listen = 8000
pools = { p = { backends = { "127.0.0.1:1" } } }
local keep = {}
function route(req)
  for i = 1, 20 do
    local p = newproxy(true)
    getmetatable(p).__gc = function() error("boom in __gc") end
    keep[#keep + 1] = p
  end
  if #keep > 40 then keep = {} collectgarbage() end
  return "p"
end
collectgarbage("setpause", 1)
