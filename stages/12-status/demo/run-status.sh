#!/usr/bin/env bash
# The status listener. rsp serves two sites, www.example.com (backend a)
# and old.example.com (a backend that is not running), and no default
# site; status_listen asks for the status listener on 127.0.0.1. Requests
# of five kinds go through the public listener (demo/ask.py): a page, a
# page the backend does not have, a Host no site takes, the dead site, and
# a head that never ends (header_timeout = 1). Then, while a slow request
# is under way: what status.json says (demo/status.py prints a few of its
# fields), a few families of /metrics, how the status listener answers
# other paths and methods, the backends on the HTML page, and rsp's log.
# What rsp lists in the order of the config's `sites` table is sorted:
# LuaJIT walks a table's keys in an order that changes from run to run.
# From stages/12-*/demo.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
# Chapter 10's demo backend; the demo runs in the stage's directory
# (stages/12-*; ../stages/ from src/).
backend=../10-reload/demo/backend.py
[ -e "$backend" ] || backend=../stages/10-reload/demo/backend.py
a=$(demo_port) dead=$(demo_port) port=$(demo_port) status=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" "$backend" a "$a"
demo_wait_port "$a"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
status_listen = $status          -- a port alone: on 127.0.0.1
header_timeout = 1
sites = {
  ["www.example.com"] = { backends = { "127.0.0.1:$a" } },
  ["old.example.com"] = { backends = { "127.0.0.1:$dead" } },   -- nothing listens there
}
LUA
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
site=http://127.0.0.1:$status

echo "== five requests through rsp"
demo_run "$DEMO_PYTHON" demo/ask.py "$port" www.example.com /
demo_run "$DEMO_PYTHON" demo/ask.py "$port" www.example.com /missing
demo_run "$DEMO_PYTHON" demo/ask.py "$port" nosuch.example.com /
demo_run "$DEMO_PYTHON" demo/ask.py "$port" old.example.com /
demo_run "$DEMO_PYTHON" demo/ask.py "$port" www.example.com / half
echo "== a slow request (backend a takes 2 s) is under way; GET /status.json meanwhile"
demo_start slow "$DEMO_PYTHON" demo/ask.py "$port" www.example.com "/?delay=2"
slow=${demo_pids[-1]}
sleep 0.5
demo_run "$DEMO_PYTHON" demo/status.py "$status"
wait "$slow"
cat "$DEMO_TMP/slow.log"
echo "== GET /metrics, four of its families (samples sorted)"
demo_run "$DEMO_PYTHON" demo/metrics.py "$status" rsp_requests_total rsp_backend_up rsp_timeouts_total rsp_requests_in_flight
echo "== what else the status listener answers"
curl -s -o /dev/null -w 'GET /nothing: %{http_code}\n' "$site/nothing"
curl -s -o /dev/null -w 'POST /metrics: %{http_code}, Allow: %header{allow}\n' -X POST "$site/metrics"
curl -s -I -o /dev/null -w 'HEAD /metrics: %{http_code}, Content-Length: %header{content-length}, %{size_download} bytes of body\n' "$site/metrics"
curl -s -o /dev/null -w 'GET /metrics on the public listener: %{http_code} from %header{x-backend}\n' \
  -H 'Host: www.example.com' "http://127.0.0.1:$port/metrics"
echo "== GET /, the backends' rows of the HTML page (sorted)"
curl -s "$site/" | grep -o '<tr class="backend[^>]*>' | sort
echo "== rsp's log, from Started on"
sed -E 's/^[0-9-]+ [0-9:]+ //' "$DEMO_TMP/rsp.log" | sed -n '/^Started/,$p'
