#!/usr/bin/env bash
# Chapter 01's half-closing client (../01-one-shot/demo/halfclose.py)
# against this stage: the whole answer arrives again.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
printf 'listenPort = %s\nbackendAddress = "127.0.0.1"\nbackendPort = %s\n' "$proxy" "$backend" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
echo "\$ python3 ../01-one-shot/demo/halfclose.py $proxy"
demo_run "$DEMO_PYTHON" ../01-one-shot/demo/halfclose.py "$proxy" || demo_fail "halfclose.py failed"
