#!/usr/bin/env bash
# Backpressure, measured: a backend streams 200 MiB as fast as it may, to a
# client that asks for it and then pauses for 3 s. How much of it does rsp
# hold meanwhile? (VmRSS in /proc/PID/status: rsp's resident memory.)
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
backend=$(demo_port) proxy=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/stream.py "$backend" 200 "$DEMO_TMP/sent"
demo_wait_port "$backend"
printf 'listenPort = %s\nbackendAddress = "127.0.0.1"\nbackendPort = %s\n' "$proxy" "$backend" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
rsp_pid=${demo_pids[-1]}
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$rsp_pid/status"; }
before=$(rss)
echo "rsp's memory before:             $before kB"
demo_start client "$DEMO_PYTHON" demo/pausing.py "$proxy" 3
client_pid=${demo_pids[-1]}
sleep 2.5
during=$(rss)
echo "while the client pauses:         $during kB (grew by $((during - before)) kB)"
echo "the backend has sent so far:     $(cat "$DEMO_TMP/sent" 2>/dev/null || echo 0) MiB of 200"
wait "$client_pid"
cat "$DEMO_TMP/client.log"
echo "the whole answer:                $((200 * 1024 * 1024 + $(printf 'HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n' $((200 << 20)) | wc -c))) bytes"
echo "verdict: $([ $((during - before)) -lt 1024 ] && echo "bounded: rsp held under 1 MiB for this client" || echo "unbounded")"
