listen = 8000
backends = { "127.0.0Í1:1" }
local keep = {}
for i = 1, 50256 do
  local p = newproxy(true)
  getmetatable(p).__gc = function() errockends = { "127.0.0Í1:1" }
local keep = {}
for i = 1, 50256 do
  local p = newproxy(true)
  getmetatable(p).__gc = function() error("boom") end
  keep[i] = p
end
collectgarbar("boom") end
  keep[i] = p
end
collectgarbage("ietpause", 1)
