#!/usr/bin/env bash
# A client that half-closes after its request (halfclose.py) still gets
# the whole answer: rsp passes the end of the request on to the backend
# with shutdown(SHUT_WR) and keeps relaying the other way.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
demo_rsp rsp ./rsp "$proxy" 127.0.0.1 "$backend"
echo "\$ python3 demo/halfclose.py $proxy"
demo_run "$DEMO_PYTHON" demo/halfclose.py "$proxy" || demo_fail "halfclose.py failed"
