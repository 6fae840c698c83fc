-- rsp in front of a personal website: two copies of the site's app server
-- on this machine, balanced, with rsp answering on port 80 of every address
-- (IPv4 and IPv6). Check it with `rsp /etc/rsp/site.lua` and read the first
-- lines it logs.
listen = 80

backends = {
  "127.0.0.1:8080",     -- first app server
  "127.0.0.1:8081",     -- second app server (remove if you run only one)
}

-- "round_robin" sends each new connection to the next backend in turn;
-- "least_conn" to the one with the fewest open connections, which is better
-- when some requests are long (downloads, streaming, websockets).
balance = "least_conn"

-- A backend that refuses a connection is skipped for this many seconds.
down_time = 5
