#!/usr/bin/env bash
# /status.json as rsp writes it. rsp has a default site (backend a) and
# one site, old.example.com, in front of a port where nothing listens;
# three requests (a page, a missing page, the dead site), a second's
# wait for the history's first entry, then GET /status.json with curl.
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
status_listen = $status
backends = { "127.0.0.1:$a" }
sites = { ["old.example.com"] = { backends = { "127.0.0.1:$dead" } } }
LUA
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
demo_run "$DEMO_PYTHON" demo/ask.py "$port" www.example.com / >/dev/null
demo_run "$DEMO_PYTHON" demo/ask.py "$port" www.example.com /missing >/dev/null
demo_run "$DEMO_PYTHON" demo/ask.py "$port" old.example.com / >/dev/null
sleep 1.2
echo "== curl -s http://127.0.0.1:$status/status.json"
curl -s "http://127.0.0.1:$status/status.json"
