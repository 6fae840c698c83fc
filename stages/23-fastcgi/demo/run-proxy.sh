#!/usr/bin/env bash
# The client behind a load balancer: rsp listening with proxy_protocol =
# true and trusted_proxies = { "127.0.0.1", "10.0.0.0/8" }, in front of
# demo/echo.py, which answers with the headers that name the client. A
# load balancer is played by demo/proxy_client.py: a PROXY v1 line, a v2
# binary header for an IPv6 client, a request with no header at all, a
# header from 127.0.0.2 (not a trusted proxy) a second later (rsp logs one
# refusal a second), an X-Forwarded-For chain
# behind a trusted inner balancer, and one from a client that is not one.
# From stages/22-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
w=$DEMO_TMP

http=$(demo_port) backend=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/echo.py "$backend"
demo_wait_port "$backend"
cat >"$w/rsp.lua" <<LUA
listen = { address = "127.0.0.1:$http", proxy_protocol = true }
trusted_proxies = { "127.0.0.1", "10.0.0.0/8" }
backends = { "127.0.0.1:$backend" }
LUA
demo_rsp rsp ./rsp "$w/rsp.lua"
send() { demo_run "$DEMO_PYTHON" demo/proxy_client.py "$http" "$@" || demo_fail "proxy_client.py failed"; }

echo "== a PROXY v1 header from the balancer at 127.0.0.1"
send --v1 "TCP4 203.0.113.7 192.0.2.1 51234 80"
echo "== a v2 header, for an IPv6 client"
send --v2 2001:db8:1:2::7
echo "== a request without a PROXY header"
send
echo "== a second later, a PROXY header from 127.0.0.2, which is not in trusted_proxies"
sleep 1.1   # rsp logs one refusal a second at most
send --from 127.0.0.2 --v1 "TCP4 203.0.113.7 192.0.2.1 51234 80"
echo "== through an inner balancer (10.0.0.5, trusted) with a chain"
send --v1 "TCP4 10.0.0.5 192.0.2.1 40000 80" --xff "198.51.100.9, 203.0.113.7, 10.0.0.4"
echo "== the same chain from a client that is no trusted proxy"
send --v1 "TCP4 203.0.113.7 192.0.2.1 51234 80" --xff "198.51.100.9, 10.0.0.4"
demo_wait_line "$w/rsp.log" 'not in trusted_proxies'
echo "== rsp's log"
sed -n 's/^[0-9-]* [0-9:]* rsp: //p' "$w/rsp.log" | grep 'proxy_protocol:'
