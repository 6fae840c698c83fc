#!/usr/bin/env bash
# Framing: a chunked POST with a second request glued behind it, sent to
# demo/recorder.py through rsp (what does the backend receive?); a 5 MiB
# upload checked by its SHA-256; and the ambiguous framings, refused.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
recorder=$(demo_port) echo=$(demo_port)
demo_start recorder "$DEMO_PYTHON" -u demo/recorder.py "$recorder"
demo_start echo "$DEMO_PYTHON" demo/backend.py echo "$echo"
demo_wait_port "$recorder"; demo_wait_port "$echo"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = $proxy
backends = { "127.0.0.1:$recorder" }
sites = { ["upload.example.com"] = { backends = { "127.0.0.1:$echo" } } }
LUA
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
post='POST /upload HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: chunked\r\n\r\n'
post+='5\r\nhello\r\n7;note=yes\r\n, world\r\n0\r\nX-Checksum: 42\r\n\r\n'
echo "\$ ask \"$post\" + \"GET /second HTTP/1.1\r\n\$H\r\n\""
ask "${post}GET /second HTTP/1.1\r\n$H\r\n"
sleep 0.8
echo "\$ cat recorder.log"
cat "$DEMO_TMP/recorder.log"
echo "\$ head -c 5M /dev/urandom > big; sha256sum big; curl -s --data-binary @big -H 'Host: upload.example.com' ... | tail -1"
head -c 5M /dev/urandom >"$DEMO_TMP/big"
sent=$(sha256sum "$DEMO_TMP/big" | cut -d' ' -f1)
got=$(demo_run curl -s --data-binary @"$DEMO_TMP/big" -H 'Host: upload.example.com' "http://127.0.0.1:$proxy/" | tail -1)
echo "$got"
[ "$got" = "body: 5242880 bytes, sha256 $sent" ] && echo "the same SHA-256 as the file sent: yes" ||
  echo "the same SHA-256 as the file sent: NO ($sent)"
seen=$(wc -l <"$DEMO_TMP/recorder.log")
try() {
  printf '$ ask "%s"%s\n' "$2" "${1:+   # $1}"
  ask "$(eval "printf '%s' \"$2\"")"
}
try "both framings" 'POST / HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
try "two lengths" 'POST / HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!'
try "a coding besides chunked" 'POST / HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n'
try "a chunk size that is not hex" 'POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5x\r\nhello\r\n0\r\n\r\n'
try "the CL.TE example" 'POST / HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nSMUGGLED'
sleep 0.8
echo "\$ cat recorder.log      # what came since the first request"
tail -n +$((seen + 1)) "$DEMO_TMP/recorder.log"
