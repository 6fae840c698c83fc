#!/usr/bin/env bash
# The pool of idle backend connections: 200 GETs from 10 clients at once,
# 20 each on its own keep-alive connection, through rsp to backend11.py,
# which counts the connections it accepts (and takes 0.05 s over each
# answer, so that the ten clients' requests overlap); with
# backend_keepalive = 32 (the default), then 0 (no pool: a new backend
# connection per request).
# From stages/09-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
for keep in 32 0; do
  backend=$(demo_port) port=$(demo_port)
  demo_start "backend$keep" "$DEMO_PYTHON" demo/backend11.py "$backend"
  demo_wait_port "$backend"
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\nbackend_keepalive = %s\n' \
    "$port" "$backend" "$keep" >"$DEMO_TMP/rsp$keep.lua"
  echo "== backend_keepalive = $keep"
  demo_rsp "rsp$keep" ./rsp "$DEMO_TMP/rsp$keep.lua"
  demo_run "$DEMO_PYTHON" demo/keepalive.py "$port" 200 10 0 0.05
  opened=$(grep -c opened "$DEMO_TMP/backend$keep.log")
  if [ "$keep" = 0 ]; then
    verdict=$([ "$opened" = 200 ] && echo "one per request" || echo "NOT one per request")
  else
    verdict=$([ "$opened" -le 10 ] && echo "at most one per client" || echo "MORE than one per client")
  fi
  echo "backend connections opened: $opened ($verdict)"
done
