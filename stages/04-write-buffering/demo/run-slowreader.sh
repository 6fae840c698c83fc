#!/usr/bin/env bash
# Chapter 02's slow reader (../02-epoll/demo/slowreader.py: a 4 KiB receive
# buffer, a one-second nap, then 11 MiB) against this stage, and a download
# limited to 4 MB/s with curl, checked with sha256sum.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
demo_site
demo_file big.bin 11
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
printf 'listenPort = %s\nbackendAddress = "127.0.0.1"\nbackendPort = %s\n' "$proxy" "$backend" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
echo "the whole answer: $(curl -s -o /dev/null -w '%{size_header} + %{size_download}' \
  "http://127.0.0.1:$backend/big.bin" | awk '{ print $1 + $3 }') bytes"
echo "\$ python3 ../02-epoll/demo/slowreader.py $proxy"
demo_run "$DEMO_PYTHON" ../02-epoll/demo/slowreader.py "$proxy" || demo_fail "slowreader.py failed"
echo "\$ curl -s --limit-rate 4M http://127.0.0.1:$proxy/big.bin | sha256sum"
demo_run curl -s --limit-rate 4M "http://127.0.0.1:$proxy/big.bin" | sha256sum
echo "\$ sha256sum <big.bin          # the file itself, on the backend"
sha256sum <"$DEMO_TMP/site/big.bin"
