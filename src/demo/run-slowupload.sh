#!/usr/bin/env bash
# Two slow uploaders in front of an application server with two sync
# workers (gunicorn, demo/app.py): each sends a 1,000-byte body a byte
# every half second for eight seconds. Meanwhile a steady client asks for
# / three times, giving each request two seconds. First through stage 16
# (../16-fast-path/rsp), then through this stage's rsp, which reads a body
# whole before it chooses a backend.
# From stages/17-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
"$DEMO_PYTHON" -c 'import gunicorn' 2>/dev/null ||
  demo_fail "this demo needs gunicorn (apt-get install python3-gunicorn)"
stage16=$(ls -d "$PWD"/../16-*/rsp "$PWD"/../stages/16-*/rsp 2>/dev/null | head -n 1)
[ -x "$stage16" ] || demo_fail "build stage 16 first: make -C stages/16-fast-path"

g=$(demo_port)
demo_start gunicorn "$DEMO_PYTHON" -m gunicorn --workers 2 --worker-class sync \
  --bind "127.0.0.1:$g" --chdir demo app:app
demo_wait_port "$g"

# through NAME BINARY: rsp in front of gunicorn, two slow uploads, a steady client
through() {
  local port
  port=$(demo_port)
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$g" >"$DEMO_TMP/$1.lua"
  demo_rsp "$1" "$2" "$DEMO_TMP/$1.lua"
  local pid=${demo_pids[-1]}
  echo "== $1"
  "$DEMO_PYTHON" demo/slow.py upload "$port" 8 & local u1=$!
  "$DEMO_PYTHON" demo/slow.py upload "$port" 8 & local u2=$!
  sleep 1
  demo_run "$DEMO_PYTHON" demo/slow.py steady "$port" 3
  wait "$u1" "$u2"
  kill "$pid"
}
through "stage 16" "$stage16"
through "stage 17" ./rsp
