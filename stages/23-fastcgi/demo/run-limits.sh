#!/usr/bin/env bash
# limit_req: rsp with two workers and limit_req = { rate = 0.25, burst = 5 }
# in front of demo/echo.py. Eight requests at once from 127.0.0.1, each on a
# connection of its own (so both workers serve some): five pass, three get
# 429 with Retry-After, and none of those reaches the backend. A client
# bound to 127.0.0.2 has a budget of its own. rsp logs one line for the
# three refusals, and a second later one more counting what it left out.
# Last, status.json's "limits".
# From stages/22-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v curl >/dev/null || demo_fail "this demo needs curl (apt-get install curl)"
w=$DEMO_TMP

http=$(demo_port) status=$(demo_port) backend=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/echo.py "$backend"
demo_wait_port "$backend"
cat >"$w/rsp.lua" <<LUA
listen = "127.0.0.1:$http"
status_listen = "127.0.0.1:$status"
backends = { "127.0.0.1:$backend" }
workers = 2
limit_req = { rate = 0.25, burst = 5 }   -- 5 at once, then one every 4 s
LUA
demo_rsp rsp ./rsp "$w/rsp.lua"

# ask FROM: one request from address FROM on a new connection; prints its
# status and Retry-After, if any.
ask() {
  demo_run curl -sS --interface "$1" -o /dev/null -D "$w/head" "http://127.0.0.1:$http/" ||
    demo_fail "curl failed"
  tr -d '\r' <"$w/head" | sed -n -e '1s/^HTTP\/1.1 //p' -e 's/^Retry-After: /Retry-After: /p' | paste -sd ' ' | sed 's/ Retry/, Retry/'
}

echo "== limit_req = { rate = 0.25, burst = 5 }: eight requests from 127.0.0.1"
for i in 1 2 3 4 5 6 7 8; do printf '%s: ' "$i"; ask 127.0.0.1; done
echo "== at the same moment, three from 127.0.0.2"
for i in 1 2 3; do printf '%s: ' "$i"; ask 127.0.0.2; done
echo "== requests that reached the backend: $(grep -c '^GET' "$w/backend.log") (5 + 3)"
echo "== a second later, once more from 127.0.0.1"
sleep 1.2
printf '9: '; ask 127.0.0.1
demo_wait_line "$w/rsp.log" '\(3 refused since the last line\)'
echo "== rsp's log"
sed -n 's/^[0-9-]* [0-9:]* rsp: //p' "$w/rsp.log" | grep 'limit_req:'
echo "== status.json"
demo_run curl -sS "http://127.0.0.1:$status/status.json" |
  "$DEMO_PYTHON" -c 'import json, sys; print("limits:", json.dumps(json.load(sys.stdin)["limits"]))'
