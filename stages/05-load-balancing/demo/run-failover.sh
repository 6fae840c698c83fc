#!/usr/bin/env bash
# Passive health: bravo is stopped, then started again, while requests keep
# coming. down_time is 1 s here, to keep the demo short.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
alpha=$(demo_port) bravo=$(demo_port) charlie=$(demo_port)
start_backend alpha "$alpha"; start_backend bravo "$bravo"; start_backend charlie "$charlie"
start_rsp round_robin 1 "$alpha" "$bravo" "$charlie"
echo "\$ kill \$bravo; for i in 1 2 3 4; do get; done"
stop_backend bravo
for i in 1 2 3 4; do get; done
echo "\$ sleep 1.5; for i in 1 2 3 4; do get; done     # bravo is due for a retry"
sleep 1.5
for i in 1 2 3 4; do get; done
echo "\$ python3 demo/backend.py bravo $bravo & sleep 1.5; for i in 1 2 3 4; do get; done"
start_backend bravo "$bravo"
sleep 1.5
for i in 1 2 3 4; do get; done
show_log
