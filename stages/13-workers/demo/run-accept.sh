#!/usr/bin/env bash
# How new connections spread over two workers. rsp with workers = 2 runs
# twice: first with one listening socket that both workers watch with
# EPOLLEXCLUSIVE (the default), then with reuseport = true (a socket of
# its own for each worker, SO_REUSEPORT). Each time, demo/hold.py opens 40
# keep-alive connections one by one (each one answered before the next
# begins), then 40 at once, keeps them open, and counts the connections
# each worker holds.
# From stages/13-*/demo.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
# Chapter 10's demo backend and client; the demo runs in the stage's
# directory (stages/13-*; ../stages/ from src/).
demo10=../10-reload/demo
[ -e "$demo10" ] || demo10=../stages/10-reload/demo
a=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" "$demo10/backend.py" a "$a"
demo_wait_port "$a"

for reuseport in false true; do
  port=$(demo_port)
  printf 'listen = "127.0.0.1:%s"\nworkers = 2\nreuseport = %s\nbackends = { "127.0.0.1:%s" }\n' \
    "$port" "$reuseport" "$a" >"$DEMO_TMP/rsp-$reuseport.lua"
  demo_rsp "rsp-$reuseport" ./rsp "$DEMO_TMP/rsp-$reuseport.lua"
  master=${demo_pids[-1]}
  sleep 0.3          # "Started." comes once the workers are forked: let them reach epoll_wait
  w1=$(grep -oE 'worker 1 started \(pid [0-9]+' "$DEMO_TMP/rsp-$reuseport.log" | grep -oE '[0-9]+$')
  w2=$(grep -oE 'worker 2 started \(pid [0-9]+' "$DEMO_TMP/rsp-$reuseport.log" | grep -oE '[0-9]+$')
  if [ "$reuseport" = false ]; then
    echo "== one listening socket, both workers waiting on it (EPOLLEXCLUSIVE)"
  else
    echo "== reuseport = true: a listening socket per worker (SO_REUSEPORT)"
  fi
  # One by one, the shared socket takes turns (every 16 accepts, listener.c):
  # both hold a share. All at once, the split is luck: no verdict.
  if [ "$reuseport" = false ]; then one=--spread many=; else one=--spread many=--spread; fi
  demo_run "$DEMO_PYTHON" demo/hold.py "$port" 40 one-by-one $one "worker 1=$w1" "worker 2=$w2"
  demo_run "$DEMO_PYTHON" demo/hold.py "$port" 40 at-once $many "worker 1=$w1" "worker 2=$w2"
  kill -TERM "$master"
  wait "$master"
done
