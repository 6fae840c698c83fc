#!/usr/bin/env bash
# Twenty GETs, one after the other, from a client that keeps its connection
# open as long as the server lets it, through chapter 08's rsp and then
# this chapter's, to an HTTP/1.1 backend that counts the connections it
# accepts (backend11.py).
# From stages/09-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
old=$DEMO_TOOLS/../stages/08-timeouts-health/rsp
[ -x "$old" ] || demo_fail "build stage 08 first: make -C stages/08-timeouts-health"
for stage in 08 09; do
  backend=$(demo_port) port=$(demo_port)
  demo_start "backend$stage" "$DEMO_PYTHON" demo/backend11.py "$backend"
  demo_wait_port "$backend"
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend" >"$DEMO_TMP/rsp$stage.lua"
  bin=./rsp
  [ "$stage" = 08 ] && bin=$old
  echo "== stage $stage's rsp"
  demo_rsp "rsp$stage" "$bin" "$DEMO_TMP/rsp$stage.lua"
  demo_run "$DEMO_PYTHON" demo/keepalive.py "$port" 20
  echo "backend connections opened: $(grep -c opened "$DEMO_TMP/backend$stage.log")"
done
