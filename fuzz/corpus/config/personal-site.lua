-- two app servers
listen = 80
backends = {
  "127.0.0.1:8080",
  "127.0.0.1:8081",
}
balance = "least_conn"
down_time = 5
