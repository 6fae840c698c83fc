#!/usr/bin/env bash
# Every backend stopped: clients get a 502 page, the log says so once; then
# one backend comes back and is used at once.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
alpha=$(demo_port) bravo=$(demo_port) charlie=$(demo_port)
start_backend alpha "$alpha"; start_backend bravo "$bravo"; start_backend charlie "$charlie"
start_rsp round_robin 5 "$alpha" "$bravo" "$charlie"
echo "\$ kill \$alpha \$bravo \$charlie; for i in 1 2 3; do get; done"
stop_backend alpha; stop_backend bravo; stop_backend charlie
for i in 1 2 3; do get | head -n 1; done
echo "\$ curl -si http://127.0.0.1:$proxy/"
demo_run curl -si "http://127.0.0.1:$proxy/"
echo "\$ python3 demo/backend.py charlie $charlie & sleep 0.5; for i in 1 2 3; do get; done"
start_backend charlie "$charlie"
sleep 0.5
for i in 1 2 3; do get; done
show_log
