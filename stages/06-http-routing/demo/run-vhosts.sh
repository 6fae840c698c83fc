#!/usr/bin/env bash
# Virtual hosts: demo/rsp.lua (a default site and two named ones) in front
# of three demo/backend.py, then demo/nodefault.lua, which has no default.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_site
echo "\$ ./rsp demo/rsp.lua        # its log, the site lines sorted (a Lua table has no order)"
log=$DEMO_TMP/rsp.log
grep 'listening' "$log"
grep ' site [^ ]*:' "$log" | sort -k5
grep -v 'listening\| site [^ ]*:' "$log"
echo "\$ curl -s -H \"Host: \$h\" http://127.0.0.1:$proxy/ | head -1      # for each \$h below"
for h in www.example.com WWW.Example.COM:8000 www.example.com. shop.example.com \
         a.b.example.com example.com example.org; do
  printf '%-22s -> ' "$h"
  demo_run curl -s -H "Host: $h" "http://127.0.0.1:$proxy/" | head -1
done
other=$(demo_port)
sed -e "s/\b8010\b/$other/; s/\b8001\b/$alpha/; s/\b8002\b/$bravo/; s/\b8003\b/$charlie/" \
  demo/nodefault.lua >"$DEMO_TMP/nodefault.lua"
demo_rsp nodefault ./rsp "$DEMO_TMP/nodefault.lua"
echo "\$ ./rsp demo/nodefault.lua"
echo "\$ curl -s -H \"Host: \$h\" http://127.0.0.1:$other/ | head -1      # for each \$h below"
for h in www.example.com shop.example.com paris.eu.example.com; do
  printf '%-22s -> ' "$h"
  demo_run curl -s -H "Host: $h" "http://127.0.0.1:$other/" | head -1
done
echo "\$ curl -si -H 'Host: example.org' http://127.0.0.1:$other/"
demo_run curl -si -H 'Host: example.org' "http://127.0.0.1:$other/" | tr -d '\r'
echo
