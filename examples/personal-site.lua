-- rsp in front of a personal website: a blog and an app on one machine.
-- Check it by running `rsp /etc/rsp/site.lua` and reading the first lines
-- it logs; a mistake is reported with the file and the setting.
listen = 80                 -- every address, IPv6 and IPv4

-- The default site, for any Host no site below matches: two copies of the
-- app server, balanced. "least_conn" sends each request to the copy with
-- the fewest open connections, better than "round_robin" when some
-- requests are long (downloads, streaming).
backends = {
  "127.0.0.1:8080",
  "127.0.0.1:8081",
}
balance = "least_conn"

-- Virtual hosts, matched against the Host header (case and port ignored):
-- exact names first, then the longest matching "*." wildcard.
sites = {
  ["blog.example.com"] = { backends = { "127.0.0.1:2368" } },
  ["*.example.com"]    = { backends = { "127.0.0.1:8080", "127.0.0.1:8081" } },
}

-- A backend that refuses a connection is skipped for this many seconds.
down_time = 5

-- Every wait has a limit, in seconds (these are the defaults; fractions
-- are fine). A client gets 408 for a head or body it does not finish, 504
-- when a backend is too slow to accept or to begin its answer.
connect_timeout  = 5     -- for a backend to accept the connection
header_timeout   = 10    -- for a client to send its whole request head
body_timeout     = 30    -- the longest pause inside a request body
response_timeout = 60    -- for a backend to begin its response
idle_timeout     = 300   -- no byte either way for this long: close

-- Ask every backend for "/" every 2 s: three failures in a row (a 5xx, no
-- answer within 1 s, a refused connection) take it out of rotation before a
-- visitor meets it, two good answers bring it back. A site or pool can
-- have its own health_check table, or health_check = false.
health_check = { path = "/", interval = 2, timeout = 1, rise = 2, fall = 3 }

-- One client address may send 20 requests at once and then 10 a second
-- (more gets 429), and hold at most 100 connections; a request body may be
-- up to 10 MiB (more gets 413). A site or pool can have its own limit_req
-- and max_body_size, allow/deny lists and a basic_auth password file.
limit_req = { rate = 10, burst = 20 }
limit_conn = 100
max_body_size = "10m"
