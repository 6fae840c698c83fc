#!/usr/bin/env bash
# The timeouts of chapter 08, one at a time, with short values so that the
# demo is quick: a black-holed backend (connect_timeout), a backend that
# never answers (response_timeout), and clients that stop halfway through
# a head (header_timeout) or a body (body_timeout).
# From stages/08-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
hole=$(demo_port) silent=$(demo_port) good=$(demo_port) port=$(demo_port)
demo_start hole "$DEMO_PYTHON" demo/backend.py hole "$hole" blackhole
demo_start silent "$DEMO_PYTHON" demo/backend.py silent "$silent" silent
demo_start good "$DEMO_PYTHON" demo/backend.py good "$good"
demo_wait_port "$silent"
demo_wait_port "$good"
sleep 0.5
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
sites = {
  ["hole.example"]   = { backends = { "127.0.0.1:$hole" } },
  ["silent.example"] = { backends = { "127.0.0.1:$silent" } },
  ["both.example"]   = { backends = { "127.0.0.1:$hole", "127.0.0.1:$good" } },
}
backends = { "127.0.0.1:$good" }
connect_timeout = 1
response_timeout = 1.5
header_timeout = 2
body_timeout = 1
LUA
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
ask() {
  demo_run curl -s -o /dev/null -H "Host: $1" -w "$1: HTTP %{http_code} after %{time_total} s\n" \
    "http://127.0.0.1:$port/" | awk '{ printf "%-15s %s %s after %.1f s\n", $1, $2, $3, $5 }'
}
ask hole.example
ask silent.example
ask both.example
ask both.example
demo_run "$DEMO_PYTHON" demo/halfway.py "$port"
sleep 0.2
echo "--- rsp's log:"
sed -E 's/^[0-9-]+ [0-9:]+ //; s/127\.0\.0\.1:[0-9]+/127.0.0.1:PORT/g' "$DEMO_TMP/rsp.log" | grep 'fired\|is down\|is up'
