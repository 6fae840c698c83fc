#!/usr/bin/env bash
# The four forms of a request target: what rsp routes by and what the
# backend gets (the first lines of demo/backend.py's answer), and the
# targets rsp refuses.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_site
show() {   # show LINES TARGET [CURL-ARGS...]: the command, then the first LINES lines
  local lines=$1 target=$2
  shift 2
  echo "\$ curl -s ${*:+$* }--request-target '$target' -H 'Host: www.example.com' http://127.0.0.1:$proxy/ | head -$lines"
  demo_run curl -s "$@" --request-target "$target" -H 'Host: www.example.com' "http://127.0.0.1:$proxy/" | head -"$lines"
}
show 3 'http://www.example.com/who?x=1'
show 3 'http://WWW.Example.com:8000/who'
show 2 'http://www.example.com' -X OPTIONS
for line in 'GET http://admin.example.com/ HTTP/1.1' 'GET ftp://admin.example.com/ HTTP/1.1' \
            'GET //admin.example.com/ HTTP/1.1' 'GET index.html HTTP/1.1' 'GET * HTTP/1.1' \
            'CONNECT www.example.com:443 HTTP/1.1'; do
  printf '$ ask "%s\\r\\n$H\\r\\n"\n' "$line"
  ask "$line\r\n$H\r\n"
done
