listen = 8000
backends = { "127.0.0.1:1" }
if #backends == 1 then error({ "not a string" }) end
