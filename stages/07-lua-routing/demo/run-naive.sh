#!/usr/bin/env bash
# The admin rule of demo/rsp.lua written against req.target (naive) and as
# it is, against req.path: seven spellings of /admin/ sent to both.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
sed 's/(req.path == "\/admin" or req.path:find/(req.target == "\/admin" or req.target:find/' demo/rsp.lua \
  >"$DEMO_TMP/naive.lua"
grep -q 'req.target == "/admin"' "$DEMO_TMP/naive.lua" || demo_fail "demo/rsp.lua has no admin rule to rewrite"
start_rsp "$DEMO_TMP/naive.lua"; naive=$port
start_rsp demo/rsp.lua; normal=$port
echo "target            naive rsp.lua"
for t in /admin/ /%61dmin/ /x/../admin/ /.//admin/ /./admin/ /x/%2e%2e/admin/ //admin/; do
  printf '%-18s' "$t"
  for p in "$naive" "$normal"; do
    demo_run curl -s --path-as-is -H 'Host: www.example.com' -o /dev/null -w '%{http_code}   ' "http://127.0.0.1:$p$t"
  done
  echo
done
