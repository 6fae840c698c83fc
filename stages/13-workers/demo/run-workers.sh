#!/usr/bin/env bash
# Worker processes. rsp starts with workers = 2 (one listening socket,
# shared) and a status listener: who is who (ps), and what each process
# holds (demo/holds.py, from /proc). Requests served by each worker in
# turn (the other one stopped with SIGSTOP meanwhile: a stopped process
# cannot take a connection, so the kernel hands it to the one waiting).
# Then a worker killed (kill -9) and its replacement, the replacement
# killed at once (the master waits a second before the next), a reload
# (SIGHUP) that every worker applies in place, a broken one, a reload that
# moves `listen` (a new set of workers), and SIGTERM. The log lines of
# each step are grouped by process (demo/log.py); the workers' own lines
# about stopping are left out (chapter 10 showed them).
# From stages/13-*/demo.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
# Chapter 10's demo backend and client; the demo runs in the stage's
# directory (stages/13-*; ../stages/ from src/).
demo10=../10-reload/demo
[ -e "$demo10" ] || demo10=../stages/10-reload/demo
a=$(demo_port) b=$(demo_port) port=$(demo_port) status=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" "$demo10/backend.py" a "$a"
demo_start backend-b "$DEMO_PYTHON" "$demo10/backend.py" b "$b"
demo_wait_port "$a"
demo_wait_port "$b"
config=$DEMO_TMP/rsp.lua
write_config() {     # write_config BACKEND_PORT [LISTEN_PORT]
  printf 'listen = "127.0.0.1:%s"\nstatus_listen = %s\nworkers = 2\nbackends = { "127.0.0.1:%s" }\n' \
    "${2:-$port}" "$status" "$1" >"$config"
}
write_config "$a"
demo_rsp rsp ./rsp "$config"
master=${demo_pids[-1]}
log=$DEMO_TMP/rsp.log
seen=0
new_lines() {        # new_lines [KEEP [DROP]]: the log lines since the last call (matching
  local lines        # the regex KEEP, and not DROP, if given)
  lines=$("$DEMO_PYTHON" demo/log.py "$log" "$seen" | sed "s|$DEMO_TMP/||g")
  seen=$(wc -l <"$log")
  grep -E -- "${1:-.}" <<<"$lines" | grep -vE -- "${2:-^\$}"
}
workers() {          # the master's children, in the order of their slots
  local n pid
  for n in 1 2; do
    pid=$(grep -oE "worker $n started \(pid [0-9]+\)" "$log" | tail -n 1 | grep -oE '[0-9]+\)$')
    echo "${pid%)}"
  done
}
wait_for_line() {    # wait_for_line COUNT REGEX: until COUNT log lines match
  local i
  for ((i = 0; i < 50; i++)); do
    [ "$(grep -cE "$2" "$log")" -ge "$1" ] && return 0
    sleep 0.1
  done
  demo_fail "no '$2' in the log"
}
get() { demo_run "$DEMO_PYTHON" "$demo10/get.py" "$@"; }
show_status() {      # status.json: requests_total and workers
  demo_run "$DEMO_PYTHON" demo/status.py "$status" workers
}

read -r w1 w2 <<<"$(workers | tr '\n' ' ')"
echo "== the processes"
for who in "master $master" "worker 1 $w1" "worker 2 $w2"; do
  pid=${who##* } name=${who% *}
  read -r ppid pgid <<<"$(ps -o ppid=,pgid= -p "$pid")"
  parent=$([ "$ppid" = "$master" ] && echo "the master" || echo "the demo's shell")
  group=$([ "$pgid" = "$pid" ] && echo "its own" || echo "the shell's")
  echo "$name: pid $pid, parent $parent, process group $group"
done
"$DEMO_PYTHON" demo/holds.py "$port" "$status" master="$master" "worker 1=$w1" "worker 2=$w2" |
  sed "s/PORT/$port/"
new_lines 'worker . started|^Started'

echo "== each worker in turn serves while the other is stopped"
for n in 1 2; do
  stopped=$([ $n = 1 ] && echo "$w1" || echo "$w2")
  kill -STOP "$stopped"
  get "$port" / "worker $n stopped, worker $((3 - n)) serves: GET /"
  kill -CONT "$stopped"
done
show_status

echo "== kill -9 worker 1"
sleep 1              # a worker that dies in its first second is replaced a second later
kill -KILL "$w1"
wait_for_line 2 'worker 1 started'
get "$port" / "a request"
new_lines
echo "-- and its replacement at once"
kill -KILL "$(workers | head -n 1)"
wait_for_line 3 'worker 1 started'
new_lines
show_status

echo "== SIGHUP, backends = { b }"
read -r w1 w2 <<<"$(workers | tr '\n' ' ')"
write_config "$b"
kill -HUP "$master"
wait_for_line 2 'reloaded: generation 2'
get "$port" / "a request"
new_lines
read -r n1 n2 <<<"$(workers | tr '\n' ' ')"
echo "the same two workers: $([ "$n1 $n2" = "$w1 $w2" ] && echo yes || echo no)"
echo "-- SIGHUP, a broken config"
echo 'workers = "many"' >>"$config"
kill -HUP "$master"
wait_for_line 1 'reload failed'
new_lines

echo "== SIGHUP, listen moves to another port"
new=$(demo_port)
write_config "$b" "$new"
kill -HUP "$master"
demo_wait_port "$new"
wait_for_line 2 'exited with status 0'
get "$new" / "a request on the new port"
get "$port" / "a request on the old port"
new_lines . ': (Terminated: stopping;|stopped$)'

echo "== SIGTERM"
read -r w1 w2 <<<"$(workers | tr '\n' ' ')"
kill -TERM "$master"
wait "$master"
echo "the master exited with status $?"
new_lines . ': (Terminated: stopping;|stopped$)'
left=$(ps -o pid= -p "$w1,$w2" | wc -l)
echo "workers left: $left"
