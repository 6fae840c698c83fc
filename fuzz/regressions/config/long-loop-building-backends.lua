local base = 8000
listen = tostring(base)
backends = {}
for i = 2, 6477777777777 do backends[#backends + 1] = "127.0.0.1:" .. (base + i) end
