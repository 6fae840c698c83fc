setmetatable(_G, { __index = function(t, k) error("no " .. k) end,
  __newindex = function(t, k, v) rawset(t, k, v) end })
listen = 8000
backends = setmetatable({}, { __len = function() return 64 end, __index = function() return 1 end })
