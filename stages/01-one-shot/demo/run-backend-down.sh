#!/usr/bin/env bash
# rsp in front of a port where nothing listens, then in front of a name that
# does not resolve: each client sees its connection end without an answer,
# rsp says why on stderr and goes on to the next client.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
nothing=$(demo_port) proxy=$(demo_port) proxy2=$(demo_port)
echo "\$ ./rsp $proxy 127.0.0.1 $nothing        # nothing listens on $nothing"
demo_rsp rsp ./rsp "$proxy" 127.0.0.1 "$nothing"
echo "\$ curl http://127.0.0.1:$proxy/"
demo_run curl -sS "http://127.0.0.1:$proxy/" 2>&1
echo "rsp's output:"
sed 's/^/  /' "$DEMO_TMP/rsp.log"
echo "\$ ./rsp $proxy2 no-such-host.invalid 80"
demo_rsp rsp2 ./rsp "$proxy2" no-such-host.invalid 80
echo "\$ curl http://127.0.0.1:$proxy2/"
demo_run curl -sS "http://127.0.0.1:$proxy2/" 2>&1
echo "rsp's output:"
sed 's/^/  /' "$DEMO_TMP/rsp2.log"
