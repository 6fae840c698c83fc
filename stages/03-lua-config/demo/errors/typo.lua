listenport = 8000   -- a typo: Lua names are case-sensitive
backendAddress = "127.0.0.1"
backendPort = 9001
