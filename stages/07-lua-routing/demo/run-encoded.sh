#!/usr/bin/env bash
# An encoded slash: demo/rsp.lua refuses it; with allow_encoded_slashes =
# true it goes through, and Python's http.server decodes it and serves the
# admin page.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
{ cat demo/rsp.lua; echo 'allow_encoded_slashes = true'; } >"$DEMO_TMP/encoded.lua"
start_rsp demo/rsp.lua; normal=$port
start_rsp "$DEMO_TMP/encoded.lua"; encoded=$port
echo "\$ curl -s --path-as-is -H 'Host: www.example.com' 'http://127.0.0.1:\$port/x/..%2Fadmin/'"
for p in "$normal" "$encoded"; do
  printf '%-46s' "$([ "$p" = "$normal" ] && echo "demo/rsp.lua:" || echo "demo/rsp.lua + allow_encoded_slashes = true:")"
  code=$(demo_run curl -s --path-as-is -H 'Host: www.example.com' -o "$DEMO_TMP/page" -w '%{http_code}' \
    "http://127.0.0.1:$p/x/..%2Fadmin/")
  if [ "$code" = 200 ]; then echo "$code: $(cat "$DEMO_TMP/page")"; else echo "$code"; fi
done
