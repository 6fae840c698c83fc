listen = 8000
sites = { ["Example.com"] = { backends = { "127.0.0.1:1" } },
  ["example.com."] = { backends = { "127.0.0.1:2" } } }
max_request_line = 300.5
