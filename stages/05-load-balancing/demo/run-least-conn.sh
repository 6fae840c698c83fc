#!/usr/bin/env bash
# least_conn with one backend kept busy: /slow holds its connection for 2 s
# while four quick requests go through.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
alpha=$(demo_port) bravo=$(demo_port) charlie=$(demo_port)
start_backend alpha "$alpha"; start_backend bravo "$bravo"; start_backend charlie "$charlie"
start_rsp least_conn 5 "$alpha" "$bravo" "$charlie"
echo "\$ get slow & sleep 0.5; for i in 1 2 3 4; do get; done; wait"
get slow & slow=$!
sleep 0.5
for i in 1 2 3 4; do get; done
wait "$slow"
