#!/usr/bin/env bash
# A backend serving one small page, rsp in front of it, and curl asking
# rsp for the page: what comes back is the backend's answer, byte for byte.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
echo "backend: a static file server on 127.0.0.1:$backend (tools/demo-http-server)"
echo "\$ ./rsp $proxy 127.0.0.1 $backend"
demo_rsp rsp ./rsp "$proxy" 127.0.0.1 "$backend"
cat "$DEMO_TMP/rsp.log"
echo "\$ curl -si http://127.0.0.1:$proxy/"
demo_run curl -si "http://127.0.0.1:$proxy/" || demo_fail "curl failed"
