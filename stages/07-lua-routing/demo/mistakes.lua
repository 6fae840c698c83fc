listen = 8030
pools = { static = { backends = { "127.0.0.1:8003" } } }

local function spin() while true do end end

function route(req)
  if req.path == "/typo" then return "statc" end                -- no such pool
  if req.path == "/oops" then return req.headers.cookie:lower() end  -- no Cookie: nil
  if req.path == "/spin" then while true do end end
  if req.path == "/catch" then                                  -- pcall cannot save it
    while true do pcall(function() while true do end end) end
  end
  if req.path == "/deep" then spin() end
  if req.path == "/sort" then                                   -- a loop inside a callback from C
    local t = {} for i = 1, 100 do t[i] = i end
    table.sort(t, function(a, b) while true do end end)
  end
  if req.path == "/gsub" then
    return (string.gsub("abc", "%w", function(c) while true do end end))
  end
  if req.path == "/number" then return 42 end
  return "static"
end
