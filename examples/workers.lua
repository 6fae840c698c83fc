-- rsp on a machine with more than one core, watched from a status page
-- (chapters 12 and 13). Copy it, change listen and backends, and check it with
-- `rsp -t workers.lua`.
listen = 80
backends = { "127.0.0.1:8080", "127.0.0.1:8081" }
balance = "least_conn"

-- One worker process per CPU. The process you start becomes their master:
-- send it the signals (SIGHUP reloads every worker, SIGTERM stops them).
workers = "auto"

-- What rsp is doing, for this machine only: http://127.0.0.1:9090/ for
-- people, /status.json for scripts, /metrics for Prometheus. From your
-- laptop: `ssh -L 9090:127.0.0.1:9090 yourserver`, then
-- http://localhost:9090/.
status_listen = "127.0.0.1:9090"

-- Active health checks run once, in the master, for every worker.
health_check = { path = "/", interval = 2, timeout = 1, rise = 2, fall = 3 }
