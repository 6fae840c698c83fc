#!/usr/bin/env bash
# Requests curl would refuse to send, written with bash's /dev/tcp: each
# limit and each malformation gets its status, and a good request after
# them is still served.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_site
a9k=$(head -c 9000 /dev/zero | tr '\0' a)
b8k=$(head -c 8000 /dev/zero | tr '\0' b)
try() {   # try COMMENT REQUEST: shows the ask line as typed, then the answer
  printf '$ ask "%s"%s\n' "$2" "${1:+   # $1}"
  ask "$(eval "printf '%s' \"$2\"")"
}
try "a 9 KB request line" 'GET /$a9k HTTP/1.1\r\n$H\r\n'
try "a 9 KB header line" 'GET / HTTP/1.1\r\n${H}X-Big: $a9k\r\n\r\n'
try "five 8 KB headers" 'GET / HTTP/1.1\r\n${H}A: $b8k\r\nB: $b8k\r\nC: $b8k\r\nD: $b8k\r\nE: $b8k\r\n\r\n'
try "the first bytes of a TLS handshake" '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03'
try "HTTP/1.1 without Host" 'GET / HTTP/1.1\r\n\r\n'
try "obs-fold" 'GET / HTTP/1.1\r\n${H}X-Folded: one\r\n two\r\n\r\n'
try "space before the colon" 'GET / HTTP/1.1\r\n${H}Transfer-Encoding : chunked\r\n\r\n'
try "a bare CR" 'GET / HTTP/1.1\r\n${H}X-A: one\rX-B: two\r\n\r\n'
try "" 'GET / HTTP/2.0\r\n$H\r\n'
try "a good one, still served" 'GET / HTTP/1.1\r\n$H\r\n'
