#!/usr/bin/env bash
# Chapter 04's frozen proxy (../04-write-buffering/demo/run-stall.sh), now
# with two backends: stall.py, which streams ticks to its first client and
# then drops every SYN, and alpha. Round-robin sends A to stall, B to alpha,
# C to stall (its connect hangs) and D to alpha.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
stall=$(demo_port) alpha=$(demo_port)
demo_start stall "$DEMO_PYTHON" ../04-write-buffering/demo/stall.py "$stall"
demo_wait_port "$stall"
start_backend alpha "$alpha"
start_rsp round_robin 5 "$stall" "$alpha"
t() {
  demo_run curl -s -o /dev/null --max-time "$2" -w "$1: HTTP %{http_code} after %{time_total} s\n" \
    "http://127.0.0.1:$proxy/" | awk '{ printf "%s %s %s after %.1f s%s\n", $1, $2, $3, $5, ($3 == "000" ? " (still waiting when curl gave up)" : "") }'
}
echo "A: python3 ../04-write-buffering/demo/ticks.py $proxy 7 &   # reads the ticks for 7 s"
demo_start ticks "$DEMO_PYTHON" ../04-write-buffering/demo/ticks.py "$proxy" 7
ticks_pid=${demo_pids[-1]}
sleep 2.5
t B 4
t C 4 >"$DEMO_TMP/c.out" &
c_pid=$!
sleep 2
t D 4
wait "$c_pid"
cat "$DEMO_TMP/c.out"
wait "$ticks_pid"
cat "$DEMO_TMP/ticks.log"
