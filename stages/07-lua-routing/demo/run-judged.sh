#!/usr/bin/env bash
# The path that was judged is the path that is sent: an untidy path, and
# what the static backend's log says it received.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
start_rsp demo/rsp.lua
args=(-s --path-as-is -H 'Host: www.example.com' "http://127.0.0.1:$port/%73tatic/./site.css?v=2")
show_cmd curl "${args[@]}"
demo_run curl "${args[@]}"
sleep 0.2
echo "\$ tail -n 1 static.log       # the static backend's log"
tail -n 1 "$DEMO_TMP/static.log"
