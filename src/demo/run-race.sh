#!/usr/bin/env bash
# Backends close idle keep-alive connections too, after a timeout of their
# own (0.2 s here: backend11.py). Four GETs 0.5 s apart through rsp, first
# to a backend that closes a connection once it has been idle 0.2 s (rsp
# sees the close while the connection waits in its pool); then to one that
# closes it only when the next request comes, without reading it: the race
# of a backend's timeout with rsp's request, made to happen every time.
# Last, a POST whose body comes after its head, to the second backend.
# From stages/09-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
for mode in idle lazy; do
  backend=$(demo_port) port=$(demo_port)
  demo_start "backend-$mode" "$DEMO_PYTHON" demo/backend11.py "$backend" "--$mode-close" 0.2
  demo_wait_port "$backend"
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend" >"$DEMO_TMP/rsp-$mode.lua"
  demo_rsp "rsp-$mode" ./rsp "$DEMO_TMP/rsp-$mode.lua"
  log=$DEMO_TMP/backend-$mode.log
  if [ $mode = idle ]; then
    echo "== a backend that closes a connection idle for 0.2 s"
  else
    echo "== one that closes it when the next request comes, unread"
  fi
  demo_run "$DEMO_PYTHON" demo/keepalive.py "$port" 4 1 0.5
  sleep 0.3     # the first backend's last connection reaches its timeout
  echo "backend: $(grep -c opened "$log") connections," \
    "$(grep -c 'idle connection closed' "$log") closed idle," \
    "$(grep -c 'request unread' "$log") closed on an unread request," \
    "$(grep -c answered "$log") answers"
done
echo "== the same backend, a POST whose body comes after its head"
demo_run "$DEMO_PYTHON" demo/latebody.py "$port" 0.5
echo "--- rsp's log:"
sed -E 's/^[0-9-]+ [0-9:]+ //; s/127\.0\.0\.1:[0-9]+/127.0.0.1:PORT/g' "$DEMO_TMP/rsp-lazy.log" |
  grep -v '^Started\|listening on\|default site' || true
