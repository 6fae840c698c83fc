#!/usr/bin/env bash
# Twenty clients that connect and say nothing (chapter 02's hold.py), in
# front of stage 05's rsp and this stage's: who gets a backend connection,
# and how many file descriptors do they cost?
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
[ -x ../05-load-balancing/rsp ] || demo_fail "build stage 05 first: make -C stages/05-load-balancing"
demo_site
backend=$(demo_port)
demo_static_backend "$backend"
fds() { ls "/proc/$1/fd" | wc -l; }
for stage in 05 06; do
  port=$(demo_port)
  bin=./rsp
  [ "$stage" = 05 ] && bin=../05-load-balancing/rsp
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend" >"$DEMO_TMP/rsp$stage.lua"
  demo_rsp "rsp$stage" "$bin" "$DEMO_TMP/rsp$stage.lua"
  pid=${demo_pids[-1]}
  before=$(fds "$pid")
  echo "\$ python3 ../02-epoll/demo/hold.py $port 20 &       # stage $stage"
  demo_start "hold$stage" "$DEMO_PYTHON" ../02-epoll/demo/hold.py "$port" 20
  sleep 1
  conns=$(ss -Htn state syn-sent state established "( dport = :$backend )" | wc -l)
  echo "20 idle clients: $conns connections to the backend, $(( $(fds "$pid") - before )) more file descriptors in rsp"
  sleep 2.5
done
