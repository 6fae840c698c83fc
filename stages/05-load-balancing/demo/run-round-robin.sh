#!/usr/bin/env bash
# Three backends that answer with their names, rsp in front with
# round_robin, and four requests.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
alpha=$(demo_port) bravo=$(demo_port) charlie=$(demo_port)
start_backend alpha "$alpha"; start_backend bravo "$bravo"; start_backend charlie "$charlie"
start_rsp round_robin 5 "$alpha" "$bravo" "$charlie"
show_log
echo "\$ for i in 1 2 3 4; do get; done"
for i in 1 2 3 4; do get; done
