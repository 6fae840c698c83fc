#!/usr/bin/env bash
# While route runs, nothing else does: a request for a static file alone,
# then /spin (while true do end) with the same request 20 ms after it.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
start_rsp demo/mistakes.lua
echo "\$ python3 demo/spin.py \$port"
demo_run "$DEMO_PYTHON" demo/spin.py "$port"
