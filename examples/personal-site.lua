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
