#!/usr/bin/env bash
# HTTPS in front of a plain HTTP backend. A throwaway CA signs a
# certificate for www.example.com and example.com (demo/certs.sh); rsp
# serves HTTP and HTTPS on two ports of 127.0.0.1. Then: curl over HTTPS
# (trusting the demo's CA alone, www.example.com resolved to 127.0.0.1 by
# --resolve), what the backend was told (demo/backend.py), the same over
# plain HTTP, and what rsp answers to ALPN offers (demo/alpn.py).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
. demo/certs.sh
demo_ca
demo_cert www "/CN=www.example.com" "DNS:www.example.com,DNS:example.com"
a=$(demo_port) port=$(demo_port) tls=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_wait_port "$a"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$a" }
tls = {
  listen = "127.0.0.1:$tls",
  certificates = { { cert = "$DEMO_TMP/www.pem", key = "$DEMO_TMP/www.key" } },
}
LUA
echo "\$ cat rsp.lua"
sed "s|$DEMO_TMP|/tmp/rsp-demo.XXXXXX|g" "$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
resolve=(--resolve "www.example.com:$tls:127.0.0.1" --resolve "www.example.com:$port:127.0.0.1")

echo "== curl over HTTPS, trusting the demo's CA"
echo "\$ curl -v --cacert ca.pem https://www.example.com:$tls/hello?x=1"
demo_run curl -sv --max-time 5 --cacert "$DEMO_TMP/ca.pem" "${resolve[@]}" -D "$DEMO_TMP/head" \
  -o "$DEMO_TMP/body" "https://www.example.com:$tls/hello?x=1" 2>"$DEMO_TMP/verbose"
grep -E '^\* (SSL connection using|ALPN: server accepted|Server certificate)|^\*  (subject|issuer):|verify ok' \
  "$DEMO_TMP/verbose"
grep -v '^Date:' "$DEMO_TMP/head" | tr -d '\r'
cat "$DEMO_TMP/body"

echo "== plain HTTP, as before"
echo "\$ curl http://www.example.com:$port/hello?x=1"
demo_run curl -s --max-time 5 "${resolve[@]}" "http://www.example.com:$port/hello?x=1"

echo "== ALPN: what the client offers, what rsp chooses"
demo_run "$DEMO_PYTHON" demo/alpn.py "$tls" www.example.com "$DEMO_TMP/ca.pem" h2,http/1.1
demo_run "$DEMO_PYTHON" demo/alpn.py "$tls" www.example.com "$DEMO_TMP/ca.pem" h2
