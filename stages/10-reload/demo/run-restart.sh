#!/usr/bin/env bash
# Why this chapter: changing the config of chapter 09's rsp takes a
# restart. rsp serves backend a, with three keep-alive clients (one idle,
# one receiving a slow response, one whose request waits at the backend:
# demo/stopping.py plays them and sends the SIGTERM); the config is
# changed to backend b, rsp stopped and started again. What each client
# saw, a connection tried while rsp was gone, and who answers after
# the restart.
# From stages/10-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
a=$(demo_port) b=$(demo_port) port=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_start backend-b "$DEMO_PYTHON" demo/backend.py b "$b"
demo_wait_port "$a"
demo_wait_port "$b"
old=$DEMO_TOOLS/../stages/09-keepalive/rsp
[ -x "$old" ] || demo_fail "build stage 09 first: make -C stages/09-keepalive"
config=$DEMO_TMP/rsp.lua
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$a" >"$config"

echo "== chapter 09's rsp, backends = { a }, three clients in flight; now the config says b"
demo_rsp rsp09 "$old" "$config"
pid=${demo_pids[-1]}
sed -i "s/:$a\"/:$b\"/" "$config"
echo "-- the only way to apply it: stop rsp and start it again"
demo_run "$DEMO_PYTHON" demo/stopping.py "$port" "$pid" drain
wait "$pid"
demo_rsp rsp09-again "$old" "$config"
"$DEMO_PYTHON" demo/get.py "$port" / "GET / after the restart"
