listen = 8000
backends = { "127.0.0.1:1" }
local keep = {}
for i = 1, 50 do
  local p = newproxy(true)
  getmetatable(p).__gc = function() error("boom") end
  keep[i] = p
end
collectgarbage("setpause", 1)
