#!/usr/bin/env bash
# Stopping rsp with requests in flight (demo/stopping.py sends the
# signals and plays the clients): an idle keep-alive connection, a slow
# response flowing, and a request still waiting at the backend, when
# SIGTERM comes (chapter 09's rsp cut them off: demo/run-restart.sh), with
# the default shutdown_timeout, 10 s. Then a response that never ends, with
# shutdown_timeout = 1; then the same with the default and a second
# SIGTERM. After each: rsp's log lines about the stop, and its exit status.
# From stages/10-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
backend=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/backend.py a "$backend"
demo_wait_port "$backend"

for mode in drain timeout twice; do
  port=$(demo_port) bin=./rsp
  case $mode in
    drain) echo "== SIGTERM with three keep-alive clients (shutdown_timeout = 10, the default)" ;;
    timeout) echo "== SIGTERM during a response that never ends, shutdown_timeout = 1" ;;
    twice) echo "== the same, shutdown_timeout = 10, and a second SIGTERM" ;;
  esac
  {
    printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend"
    [ $mode = timeout ] && echo "shutdown_timeout = 1"
  } >"$DEMO_TMP/$mode.lua"
  demo_rsp "rsp-$mode" "$bin" "$DEMO_TMP/$mode.lua"
  pid=${demo_pids[-1]}
  demo_run "$DEMO_PYTHON" demo/stopping.py "$port" "$pid" "$mode"
  wait "$pid"
  echo "rsp exited with status $?; its log:"
  sed -E 's/^[0-9-]+ [0-9:]+ //' "$DEMO_TMP/rsp-$mode.log" | grep -E 'stop|shutdown_timeout|Terminated'
done
