listen = { 80 }
backends = "127.0.0.1:80"
sites = { [1] = {}, [true] = 1, ["x\0y"] = {} }
