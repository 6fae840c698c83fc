#!/usr/bin/env bash
# The TLS handshake on rsp's event loop. rsp runs under strace (accept4,
# read, write, epoll_wait), with header_timeout = 2. First a slow client
# (demo/slowhello.py) sends the first 8 bytes of its ClientHello one at a
# time, 100 ms apart, then the rest, and 100 ms after the server's answer
# its Finished and GET / together; demo/trace.py shows
# what rsp did with that connection, from accept4 to the request it
# forwarded. Then clients that are no good at TLS (demo/hostile.py):
# stalled halfway through a ClientHello, sending garbage, not trusting
# rsp's CA; a good client meanwhile; and what rsp's log says.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"
. demo/certs.sh
demo_ca
demo_cert www "/CN=www.example.com" "DNS:www.example.com"
a=$(demo_port) port=$(demo_port) tls=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_wait_port "$a"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$a" }
header_timeout = 2
tls = {
  listen = "127.0.0.1:$tls",
  certificates = { { cert = "$DEMO_TMP/www.pem", key = "$DEMO_TMP/www.key" } },
}
LUA
demo_rsp rsp strace -f -qq -e trace=accept4,read,write,epoll_wait -o "$DEMO_TMP/trace" \
  ./rsp "$DEMO_TMP/rsp.lua"

echo "== a client that sends its ClientHello slowly"
demo_run "$DEMO_PYTHON" demo/slowhello.py "$tls" www.example.com "$DEMO_TMP/ca.pem" 8 0.1
echo "== what rsp did with it (strace)"
"$DEMO_PYTHON" demo/trace.py "$DEMO_TMP/trace"

demo_run "$DEMO_PYTHON" demo/hostile.py "$tls" www.example.com "$DEMO_TMP/ca.pem" 20 2
echo "== rsp's log"
sed -nE 's/^[0-9-]+ [0-9:]+ (rsp: TLS.*)/\1/p' "$DEMO_TMP/rsp.log"
