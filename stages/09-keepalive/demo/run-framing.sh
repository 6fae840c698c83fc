#!/usr/bin/env bash
# How rsp frames each kind of response to its client, and whether the
# client's connection survives it: framing_backend.py answers with a
# Content-Length, chunked, delimited by its close, 204, a HEAD, and a 103
# before the 200; the last two requests come from an HTTP/1.0 client that
# asks for keep-alive.
# From stages/09-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
backend=$(demo_port) port=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/framing_backend.py "$backend"
demo_wait_port "$backend"
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
demo_run "$DEMO_PYTHON" demo/framing.py "$port"
