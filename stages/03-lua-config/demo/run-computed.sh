#!/usr/bin/env bash
# demo/computed.lua takes its ports from the environment. Start a backend,
# then rsp with that config, and fetch the page through it.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
echo "\$ RSP_PORT=$proxy BACKEND_PORT=$backend ./rsp demo/computed.lua"
RSP_PORT=$proxy BACKEND_PORT=$backend demo_rsp rsp ./rsp demo/computed.lua
cat "$DEMO_TMP/rsp.log"
echo "\$ curl -s http://127.0.0.1:$proxy/"
demo_run curl -sS "http://127.0.0.1:$proxy/" || demo_fail "curl failed"
