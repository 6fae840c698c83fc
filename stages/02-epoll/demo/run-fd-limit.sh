#!/usr/bin/env bash
# rsp with room for only 10 file descriptors: six are its own, so two
# client/backend pairs fit. hold.py keeps two connections open; a third
# client is turned away at once (the spare-fd trick), rsp does not spin,
# and once the two let go, service is back.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
echo "\$ (ulimit -n 10; exec ./rsp $proxy 127.0.0.1 $backend) &"
demo_rsp rsp bash -c "ulimit -n 10; exec ./rsp $proxy 127.0.0.1 $backend"
rsp_pid=${demo_pids[-1]}
echo "\$ python3 demo/hold.py $proxy 2 &"
demo_start hold "$DEMO_PYTHON" demo/hold.py "$proxy" 2
hold_pid=${demo_pids[-1]}
sleep 0.5
cpu() { awk '{ print $14 + $15 }' "/proc/$rsp_pid/stat"; }   # utime + stime, in ticks
before=$(cpu)
echo "\$ curl http://127.0.0.1:$proxy/"
demo_run curl -sS "http://127.0.0.1:$proxy/" 2>&1
sleep 1
ticks=$(( $(cpu) - before ))
echo "rsp's stderr: $(grep 'out of file' "$DEMO_TMP/rsp.log")"
echo "CPU rsp used in the second after: $([ "$ticks" -le 10 ] && echo "next to none" || echo "$ticks ticks: it spins")"
wait "$hold_pid" 2>/dev/null
echo "hold.py has let go."
echo "\$ curl http://127.0.0.1:$proxy/"
demo_run curl -sS "http://127.0.0.1:$proxy/" 2>&1
