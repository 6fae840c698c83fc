#!/usr/bin/env bash
# The chapter's config, demo/rsp.lua, in front of three small sites: the
# app on two backends, static files on a third, and what route answers
# itself (a redirect, a 403, a health check).
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
start_rsp demo/rsp.lua
echo "\$ ./rsp demo/rsp.lua"
cat "$DEMO_TMP/rsp.log"
get() {   # get ARGS...: shows the curl command line, then runs it
  show_cmd curl "$@"
  demo_run curl "$@" | tr -d '\r'
}
H='Host: www.example.com'
get -s -H "$H" "http://127.0.0.1:$port/"
get -s -H "$H" "http://127.0.0.1:$port/"
get -s -H "$H" "http://127.0.0.1:$port/static/site.css"
get -s -H "$H" "http://127.0.0.1:$port/ping"
get -sI -H 'Host: example.com' "http://127.0.0.1:$port/blog/?page=2"
get -s -o /dev/null -w '%{http_code}\n' -H "$H" "http://127.0.0.1:$port/admin/"
get -s -o /dev/null -w '%{http_code}\n' -H 'Host: shop.example.org' "http://127.0.0.1:$port/"
