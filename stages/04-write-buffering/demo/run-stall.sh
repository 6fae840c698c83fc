#!/usr/bin/env bash
# The limit this stage leaves: its connect to the backend blocks the whole
# event loop. stall.py streams ticks to client A, then lets the kernel drop
# every later SYN, like a host that vanished. While client B's connect hangs
# on it, nobody is served, not even A, whose ticks pile up in the kernel.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
stall=$(demo_port) proxy=$(demo_port)
demo_start stall "$DEMO_PYTHON" demo/stall.py "$stall"
demo_wait_port "$stall"
printf 'listenPort = %s\nbackendAddress = "127.0.0.1"\nbackendPort = %s\n' "$proxy" "$stall" >"$DEMO_TMP/rsp.lua"
echo "stall.py on port $stall; rsp on port $proxy in front of it"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
echo "A: python3 demo/ticks.py $proxy 7 &             # reads the ticks for 7 s"
demo_start ticks "$DEMO_PYTHON" demo/ticks.py "$proxy" 7
ticks_pid=${demo_pids[-1]}
sleep 2.5
echo "B: curl --max-time 4 http://127.0.0.1:$proxy/   # 2.5 s later"
demo_run curl -s -o /dev/null --max-time 4 -w 'B: HTTP %{http_code} after %{time_total} s\n' \
  "http://127.0.0.1:$proxy/" | awk '{ printf "%s %s %s after %.1f s%s\n", $1, $2, $3, $5, ($3 == "000" ? " (no answer at all)" : "") }'
wait "$ticks_pid"
cat "$DEMO_TMP/ticks.log"
