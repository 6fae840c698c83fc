#!/usr/bin/env bash
# What HTTPS alone leaves undone. rsp serves HTTP and HTTPS as chapter 14
# left it: a `tls` table and nothing else (no redirect_http, no hsts, no
# acme_webroot), with a certificate from a throwaway CA (demo/certs.sh).
# Then: a visitor who typed http:// is served over plain HTTP, and so is
# the login form it posts; the certificate is one we made by hand, valid
# for two days; and a client that trusts only the system's CAs, as a
# browser does, refuses it.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
. demo/certs.sh
demo_ca
demo_cert www "/CN=www.example.com" "DNS:www.example.com"
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
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
resolve=(--resolve "www.example.com:$tls:127.0.0.1" --resolve "www.example.com:$port:127.0.0.1")

echo "== a visitor who typed http://www.example.com/account"
demo_run curl -s --max-time 5 "${resolve[@]}" "http://www.example.com:$port/account"
echo "== the login form on that page, posted to http:// as well"
demo_run curl -s --max-time 5 "${resolve[@]}" -d 'user=alice&password=hunter2' \
  "http://www.example.com:$port/login"
echo "== the certificate"
openssl x509 -in "$DEMO_TMP/www.pem" -noout -subject -issuer
start=$(date -d "$(openssl x509 -in "$DEMO_TMP/www.pem" -noout -startdate | cut -d= -f2)" +%s)
end=$(date -d "$(openssl x509 -in "$DEMO_TMP/www.pem" -noout -enddate | cut -d= -f2)" +%s)
echo "valid for $(((end - start) / 86400)) days, then made again by hand"
echo "== a client that trusts the system's CAs, as a browser does"
if out=$(demo_run curl -sS --max-time 5 "${resolve[@]}" "https://www.example.com:$tls/" 2>&1); then
  echo "accepted (?)"
else
  out=${out#curl: }
  echo "refused: ${out%%$'\n'*}"
fi
