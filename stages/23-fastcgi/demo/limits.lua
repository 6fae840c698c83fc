-- demo/limits.lua: a personal site with limits (chapter 22).
listen = { address = "0.0.0.0:80", proxy_protocol = true }   -- behind a load balancer
trusted_proxies = { "10.0.0.0/8" }
backends = { "127.0.0.1:8001" }
limit_req = { rate = 10, burst = 20 }
limit_conn = 100
