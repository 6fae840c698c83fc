#!/usr/bin/env bash
# Out of file descriptors: rsp limited to 10 (eight are its own), two
# silent clients take the rest (chapter 02's hold.py, which lets go after
# 3 s), and more clients keep coming. They get a 503, the log gets a line
# a second, rsp does not spin, and service is back when the two let go.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$proxy" "$backend" >"$DEMO_TMP/rsp.lua"
echo "\$ (ulimit -n 10; exec ./rsp rsp.lua) &"
# Only 0, 1 and 2 open, whatever the shell that runs the demo left open.
demo_rsp rsp bash -c 'for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
                      ulimit -n 10; exec ./rsp "$1"' rsp "$DEMO_TMP/rsp.lua"
rsp_pid=${demo_pids[-1]}
echo "\$ python3 ../02-epoll/demo/hold.py $proxy 2 &"
demo_start hold "$DEMO_PYTHON" ../02-epoll/demo/hold.py "$proxy" 2
sleep 0.3
echo "\$ curl -si http://127.0.0.1:$proxy/"
demo_run curl -si "http://127.0.0.1:$proxy/" | tr -d '\r'
echo "\$ for i in \$(seq 30); do curl -s -o /dev/null -w '%{http_code} ' http://127.0.0.1:$proxy/; sleep 0.1; done"
codes=$(for i in $(seq 30); do curl -s -o /dev/null -w '%{http_code} ' "http://127.0.0.1:$proxy/"; sleep 0.1; done)
echo "${codes% }"
echo "rsp's log, first and last line:"
grep 'file descriptors' "$DEMO_TMP/rsp.log" >"$DEMO_TMP/fd.log"
sed -n '1p;$p' "$DEMO_TMP/fd.log" | sed 's/^/  /'
lines=$(grep -c 'out of file descriptors' "$DEMO_TMP/fd.log")
seconds=$(grep 'out of file descriptors' "$DEMO_TMP/fd.log" | cut -c1-19 | sort -u | wc -l)
echo "out-of-descriptors lines: at most one a second: $([ "$lines" -eq "$seconds" ] && echo yes || echo no)"
ticks=$(awk '{ print $14 + $15 }' "/proc/$rsp_pid/stat")
echo "CPU time rsp used in all: $([ "$ticks" -le 20 ] && echo "next to none" || echo "$ticks ticks: it spins")"
