#!/usr/bin/env bash
# The status page. rsp (workers = 2) serves www.example.com from pool
# `app` (backends a and b, checked every second) and old.example.com from
# a backend that is not running. demo/traffic.py sends 8 seconds of
# requests to www.example.com, from 5 a second up to 40 and down again;
# backend b is stopped after 3 seconds. Then demo/page.py reads the page
# (GET / on the status listener) and says what it is made of. Given a
# file name (demo/run-page.sh page.png), the demo also has headless
# Chromium take a picture of the page.
# From stages/11-*/demo or from src/demo (src holds the newest stage's demos).
shot=${1:+$(realpath "$1")}
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
# Chapter 10's demo backend and client; the demo runs in the stage's
# directory (stages/11-*, or src/).
demo10=../11-logs-service/demo
[ -e "$demo10" ] || demo10=../stages/11-logs-service/demo
a=$(demo_port) b=$(demo_port) dead=$(demo_port) port=$(demo_port) status=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" "$demo10/backend.py" a "$a"
demo_start backend-b "$DEMO_PYTHON" "$demo10/backend.py" b "$b"
backend_b=${demo_pids[-1]}
demo_wait_port "$a"
demo_wait_port "$b"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
status_listen = $status
workers = 2
pools = {
  app = { backends = { "127.0.0.1:$a", "127.0.0.1:$b" },
          health_check = { path = "/", interval = 1, timeout = 0.5, fall = 2 } },
}
sites = {
  ["www.example.com"] = { pool = "app" },
  ["old.example.com"] = { backends = { "127.0.0.1:$dead" } },
}
LUA
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"

echo "== 8 s of requests to www.example.com; backend b stops after 3 s"
( sleep 3; kill "$backend_b" ) &
demo_pids+=($!)
demo_run "$DEMO_PYTHON" demo/traffic.py "$port" www.example.com 5 10 20 40 30 20 10 5
demo_run "$DEMO_PYTHON" demo/ask.py "$port" old.example.com /
echo "== GET / on the status listener"
demo_run "$DEMO_PYTHON" demo/page.py "$status"
if [ -n "$shot" ]; then
  browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome) ||
    demo_fail "no chromium to take the picture with"
  demo_run "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$DEMO_TMP/chromium" --window-size=900,1030 --screenshot="$shot" \
    "http://127.0.0.1:$status/" >"$DEMO_TMP/chromium.log" 2>&1 || demo_fail "chromium: $(tail -n 3 "$DEMO_TMP/chromium.log")"
  echo "(the picture: $1)"
fi
