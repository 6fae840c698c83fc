#!/usr/bin/env bash
# The head the backend gets: a client that sends every header it should
# not, then one over IPv6 (rsp's Forwarded quotes what needs quoting).
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_site
cat <<SH
\$ curl -s http://127.0.0.1:$proxy/who -H 'Host: www.example.com' \\
     -H 'X-Forwarded-For: 203.0.113.7' -H 'X-Real-IP: 10.0.0.1' -H 'X_Real_IP: 10.0.0.2' \\
     -H 'Forwarded: for=10.0.0.3' -H 'X-Original-URL: /admin/' \\
     -H 'X-Forwarded-Proto: https' -H 'X-Forwarded-Ssl: on' -H 'Connection: keep-alive, X-Hop' \\
     -H 'X-Hop: for rsp only' -H 'X-Kept: for the backend'
SH
demo_run curl -s "http://127.0.0.1:$proxy/who" -H 'Host: www.example.com' \
  -H 'X-Forwarded-For: 203.0.113.7' -H 'X-Real-IP: 10.0.0.1' -H 'X_Real_IP: 10.0.0.2' \
  -H 'Forwarded: for=10.0.0.3' -H 'X-Original-URL: /admin/' \
  -H 'X-Forwarded-Proto: https' -H 'X-Forwarded-Ssl: on' -H 'Connection: keep-alive, X-Hop' \
  -H 'X-Hop: for rsp only' -H 'X-Kept: for the backend'
echo "\$ curl -s -g 'http://[::1]:$proxy/' | grep -i forwarded"
demo_run curl -s -g "http://[::1]:$proxy/" | grep -i forwarded
