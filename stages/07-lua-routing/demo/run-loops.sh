#!/usr/bin/env bash
# The loops of demo/mistakes.lua, each cut off by the time limit (0.1 s),
# and a request after them served at full speed; then rsp's log.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
start_rsp demo/mistakes.lua
for p in /spin /catch /deep /sort /gsub /static/site.css; do
  printf '%-18s' "$p"
  demo_run curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$port$p" |
    awk '{ printf "%s after %.3f s\n", $1, $2 }'
done
echo "rsp's log:"
rsp_log mistakes | grep "^[0-9]"   # each entry's first line, without its traceback
