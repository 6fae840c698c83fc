#!/usr/bin/env bash
# The status page. rsp serves www.example.com from pool
# `app` (backends a and b, checked every second) and old.example.com from
# a backend that is not running. demo/traffic.py sends 8 seconds of
# requests to www.example.com, from 5 a second up to 40 and down again;
# backend b is stopped after 3 seconds. Then demo/page.py reads the page
# (GET / on the status listener) and says what it is made of. Given a
# file name (demo/run-page.sh page.png), the traffic goes on for two
# minutes instead, rising and falling (backend b stops after one), and the
# demo has headless Chromium take a picture of the page.
# From stages/12-*/demo.
shot=${1:+$(realpath "$1")}
[ -n "$shot" ] && export DEMO_TIMEOUT=200 DEMO_STEP_TIMEOUT=150
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
# Chapter 10's demo backend; the demo runs in the stage's
# directory (stages/12-*; ../stages/ from src/).
demo10=../10-reload/demo
[ -e "$demo10" ] || demo10=../stages/10-reload/demo
a=$(demo_port) b=$(demo_port) dead=$(demo_port) port=$(demo_port) status=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" "$demo10/backend.py" a "$a"
demo_start backend-b "$DEMO_PYTHON" "$demo10/backend.py" b "$b"
backend_b=${demo_pids[-1]}
demo_wait_port "$a"
demo_wait_port "$b"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
status_listen = $status
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

if [ -n "$shot" ]; then
  # Two minutes of a slow wave: 5 to 40 requests a second and back, twice.
  rates=$(for s in $(seq 0 119); do
    awk -v s="$s" 'BEGIN { printf "%d ", 22.5 - 17.5 * cos(s * 3.14159 / 30) }'; done)
  stop_b=60
  echo "== 120 s of requests to www.example.com; backend b stops after $stop_b s"
else
  rates="5 10 20 40 30 20 10 5"
  stop_b=3
  echo "== 8 s of requests to www.example.com; backend b stops after 3 s"
fi
( sleep "$stop_b"; kill "$backend_b" ) &
demo_pids+=($!)
# shellcheck disable=SC2086 # one argument per second
demo_run "$DEMO_PYTHON" demo/traffic.py "$port" www.example.com $rates
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
