listen = 1
backends = {}
for i = 1, 65 do backends[i] = "127.0.0.1:" .. i end
