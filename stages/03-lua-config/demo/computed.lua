-- computed.lua: the ports come from the environment, with defaults.
listenPort = os.getenv("RSP_PORT") or 8000

-- Ordinary Lua works too: locals, arithmetic, and so on.
local base = 9000
backendAddress = "localhost"
backendPort = os.getenv("BACKEND_PORT") or base + 1
