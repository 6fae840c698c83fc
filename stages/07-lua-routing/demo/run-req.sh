#!/usr/bin/env bash
# The req table route sees: demo/dump.lua answers every request with it.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_rsp demo/dump.lua
args=(-s --path-as-is "http://127.0.0.1:$port/docs//./a/../%7Euser/caf%c3%a9/%zz?lang=en&x=%41"
      -H "Host: WWW.Example.COM.:$port" -H 'Accept: text/html' -H 'X-Tag: one' -H 'x-tag: two'
      -H 'Cookie: theme=dark' -H 'Cookie: lang=en')
show_cmd curl "${args[@]}"
demo_run curl "${args[@]}"
