#!/usr/bin/env bash
# Pipelining: five requests in one write, through rsp, to an HTTP/1.1
# backend (backend11.py) that takes its time on two of them. The answers
# come back in the order of the requests.
# From stages/09-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
backend=$(demo_port) port=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/backend11.py "$backend"
demo_wait_port "$backend"
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
demo_run "$DEMO_PYTHON" demo/pipeline.py "$port"
echo "backend connections opened: $(grep -c opened "$DEMO_TMP/backend.log")"
