#!/usr/bin/env bash
# One core is all one process gets. An nginx backend answers "ok" as fast
# as it can; rsp in front of it has work of its own to do for every
# request (a route function that tries 2,000 old paths, a list of
# redirects of a site that moved), so that rsp, not wrk or the backend,
# is what limits the rate. wrk (1 thread, 32 keep-alive connections, 4 s)
# loads first chapter 12's rsp (../12-status/rsp, built first), one
# process with one thread, then this stage's with workers = 2. For each:
# the requests per second wrk saw, and how much of the run rsp's
# processes spent on a CPU or waiting for one (from /proc/PID/schedstat),
# in cores: a thread that always has work wants one core all the time,
# and one thread can never use more than one. The machine may be busy
# with other things (then rsp runs less and waits more), but what it
# wants does not change.
# From stages/13-*/demo.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
old=../12-status
[ -x "$old/rsp" ] || demo_fail "chapter 12's rsp is not built: make -C $old first"
command -v wrk >/dev/null || demo_fail "wrk is not installed (apt-get install wrk)"
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || demo_fail "nginx is not installed (apt-get install nginx)"
backend=$(demo_port)
mkdir -p "$DEMO_TMP/nginx"
cat >"$DEMO_TMP/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $DEMO_TMP/nginx/nginx.pid;
error_log $DEMO_TMP/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $DEMO_TMP/nginx; proxy_temp_path $DEMO_TMP/nginx;
  fastcgi_temp_path $DEMO_TMP/nginx; uwsgi_temp_path $DEMO_TMP/nginx; scgi_temp_path $DEMO_TMP/nginx;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$backend; location / { return 200 "ok\n"; } }
}
CONF
demo_start nginx "$nginx" -p "$DEMO_TMP/nginx" -c "$DEMO_TMP/nginx/nginx.conf"
demo_wait_port "$backend"

sched() {            # sched PID...: ns on a CPU, and ns waiting for one, of these processes
  local pid run=0 wait=0 a b c
  for pid in "$@"; do
    read -r a b c <"/proc/$pid/schedstat"
    run=$((run + a)) wait=$((wait + b))
  done
  echo "$run $wait"
}
run() {              # run LABEL BINARY WORKERS
  local port pid pids run0 wait0 run1 wait1 start end rps ns
  port=$(demo_port)
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n%s\n' "$port" "$backend" \
    "$([ "$3" -gt 1 ] && echo "workers = $3")" >"$DEMO_TMP/$1.lua"
  cat >>"$DEMO_TMP/$1.lua" <<'LUA'
local moved = {}
for i = 1, 2000 do moved[i] = "^/archive/" .. i .. "/" end
function route(req)
  for _, old in ipairs(moved) do
    if req.path:find(old) then return { status = 301, location = "/" } end
  end
  return nil
end
LUA
  demo_rsp "rsp-$1" "$2" "$DEMO_TMP/$1.lua"
  pid=${demo_pids[-1]}
  sleep 0.3
  # shellcheck disable=SC2046 # one pid a word
  pids=("$pid" $(cat "/proc/$pid/task/$pid/children"))
  read -r run0 wait0 <<<"$(sched "${pids[@]}")"
  start=$(date +%s%N)
  rps=$(wrk -t1 -c32 -d4s "http://127.0.0.1:$port/" | awk '/^Requests\/sec/ { printf "%d", $2 }')
  end=$(date +%s%N)
  read -r run1 wait1 <<<"$(sched "${pids[@]}")"
  ns=$((end - start))
  n=$((${#pids[@]} > 1 ? ${#pids[@]} - 1 : 1))  # the master serves no client
  cores() { awk -v r="$1" -v n="$ns" 'BEGIN { printf "%.1f", r / n }'; }
  echo "$1: $rps requests/s;" \
    "$([ "$n" = 1 ] && echo "its one thread" || echo "its $n workers") wanted" \
    "$(cores $((run1 - run0 + wait1 - wait0))) cores" \
    "(ran $(cores $((run1 - run0))), waited for a CPU $(cores $((wait1 - wait0))))"
  kill -TERM "${pids[0]}"
  wait "$pid" 2>/dev/null
}
echo "== $(nproc) cores; wrk: 1 thread, 32 connections, 4 s; backend: nginx"
run "chapter 12, one process" "$old/rsp" 1
run "this stage, workers = 2" ./rsp 2
