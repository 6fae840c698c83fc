#!/usr/bin/env bash
# A WebSocket through rsp: ws_backend.py accepts the upgrade at /echo and
# echoes what ws_client.py sends, through the tunnel rsp makes of the
# connection after the 101; an upgrade the backend refuses leaves an
# ordinary HTTP connection, good for the next request.
# From stages/09-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
backend=$(demo_port) port=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/ws_backend.py "$backend"
demo_wait_port "$backend"
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
demo_run "$DEMO_PYTHON" demo/ws_client.py "$port"
