#!/usr/bin/env bash
# Chapter 01's half-closing client (../01-one-shot/demo/halfclose.py)
# against this stage: the first end of file closes the whole pair, so the
# answer is lost, though the request did reach the backend.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
demo_rsp rsp ./rsp "$proxy" 127.0.0.1 "$backend"
echo "\$ python3 ../01-one-shot/demo/halfclose.py $proxy"
demo_run "$DEMO_PYTHON" ../01-one-shot/demo/halfclose.py "$proxy" || demo_fail "halfclose.py failed"
sleep 0.3
echo "the backend's log: $(grep -m1 '^GET' "$DEMO_TMP/backend.log")"
