#!/usr/bin/env bash
# 50 keep-alive clients, 20 rounds of one request each, in front of a
# backend that answers only once all 50 requests of a round are in (so
# each round has 50 in flight at once), with the default
# backend_keepalive = 32: how many connections rsp opens to the backend
# per round. First stage 17 (../17-buffering/rsp), then this stage's rsp.
# From stages/18-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
stage17=$(ls -d "$PWD"/../17-*/rsp "$PWD"/../stages/17-*/rsp 2>/dev/null | head -n 1)
[ -x "$stage17" ] || demo_fail "build stage 17 first: make -C stages/17-buffering"

# through NAME BINARY: a fresh backend, rsp in front of it, the clients
through() {
  local b port
  b=$(demo_port)
  demo_start backend "$DEMO_PYTHON" demo/pool.py backend "$b" 50
  demo_wait_port "$b"
  port=$(demo_port)
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$b" >"$DEMO_TMP/$1.lua"
  demo_rsp "$1" "$2" "$DEMO_TMP/$1.lua"
  echo "== $1"
  demo_run "$DEMO_PYTHON" demo/pool.py clients "$port" "$b" 50 20
}
through "stage 17" "$stage17"
through "stage 18" ./rsp
