#!/usr/bin/env bash
# One client connects and says nothing for 3 s (silent.py); a second one
# asks for the page with curl meanwhile. How long does the second wait?
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
demo_rsp rsp ./rsp "$proxy" 127.0.0.1 "$backend"
echo "\$ python3 demo/silent.py $proxy 3 &"
demo_start silent "$DEMO_PYTHON" demo/silent.py "$proxy" 3
sleep 0.3
echo "\$ curl -s -o /dev/null -w '%{http_code} %{time_total}' http://127.0.0.1:$proxy/"
out=$(demo_run curl -s -o /dev/null -w '%{http_code} %{time_total}' "http://127.0.0.1:$proxy/")
read -r code seconds <<<"$out"
verdict="it did not wait"
awk -v s="$seconds" 'BEGIN { exit !(s > 1) }' && verdict="it waited for the silent client"
printf 'second client: HTTP %s after %.1f s (%s)\n' "$code" "$seconds" "$verdict"
