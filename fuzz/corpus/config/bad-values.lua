listen = "0008000"
backends = { "127.0.0.1:80", "127.0.0.1:80" }
balance = "random"
down_time = 0/0
max_request_line = 2048
max_request_head = 1024
