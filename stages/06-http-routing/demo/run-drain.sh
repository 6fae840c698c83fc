#!/usr/bin/env bash
# Fifty clients each write an 800 kB POST for a host rsp does not serve
# before reading the answer: rsp answers 421 at once, and drains the rest
# of each body, so that closing sends a FIN after the answer, not a reset.
# Then five 16 MB POSTs: past 1 MiB rsp stops draining, and the close is a
# reset that the client, still writing, gets instead of the answer.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
proxy=$(demo_port)
printf 'listen = "127.0.0.1:%s"\nsites = { ["www.example.com"] = { backends = { "127.0.0.1:9" } } }\n' \
  "$proxy" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
echo "\$ python3 demo/bigpost.py $proxy 50 800"
demo_run "$DEMO_PYTHON" demo/bigpost.py "$proxy" 50 800
echo "\$ python3 demo/bigpost.py $proxy 5 16000       # 16 MB each: more than a drain takes"
demo_run "$DEMO_PYTHON" demo/bigpost.py "$proxy" 5 16000
