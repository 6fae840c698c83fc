#!/usr/bin/env bash
# demo/mistakes.lua, its mistakes that fail at once: each costs one request
# a 500 and the log a line, and the next request is served.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
start_rsp demo/mistakes.lua
for p in /typo /oops /number /static/site.css; do
  printf '%-18s' "$p"
  demo_run curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port$p"
done
echo "rsp's log:"
rsp_log mistakes
