#!/usr/bin/env bash
# SNI: one HTTPS port, several certificates. A throwaway CA
# (demo/certs.sh) signs three: one for www.example.com and example.com
# (listed first: the default), one for *.example.org, and one for
# shop.example.org, listed after the wildcard. For each name a client may
# ask for (openssl s_client -servername NAME, or no name at all), which
# certificate rsp presents; then curl, which checks that the certificate
# is for the name it asked for.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
. demo/certs.sh
demo_ca
demo_cert www "/CN=www.example.com" "DNS:www.example.com,DNS:example.com"
demo_cert org "/CN=*.example.org" "DNS:*.example.org"
demo_cert shop "/CN=shop.example.org" "DNS:shop.example.org"
a=$(demo_port) port=$(demo_port) tls=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_wait_port "$a"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$a" }
tls = {
  listen = "127.0.0.1:$tls",
  certificates = {
    { cert = "$DEMO_TMP/www.pem",  key = "$DEMO_TMP/www.key" },    -- the default
    { cert = "$DEMO_TMP/org.pem",  key = "$DEMO_TMP/org.key" },
    { cert = "$DEMO_TMP/shop.pem", key = "$DEMO_TMP/shop.key" },
  },
}
LUA
echo "\$ cat rsp.lua"
sed "s|$DEMO_TMP|/tmp/rsp-demo.XXXXXX|g" "$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"

# The subject of the certificate rsp presents for SNI $1 (none if empty).
presented() {
  local sni=(-servername "$1")
  [ -n "$1" ] || sni=(-noservername)
  demo_run openssl s_client -connect "127.0.0.1:$tls" "${sni[@]}" </dev/null 2>/dev/null |
    openssl x509 -noout -subject -nameopt oneline 2>/dev/null | sed 's/^subject=//'
}

echo "== which certificate for which name (openssl s_client -servername NAME)"
for name in www.example.com example.com blog.example.org shop.example.org SHOP.Example.Org \
            a.blog.example.org example.org other.test ""; do
  printf '%-22s %s\n' "${name:-(no name)}" "$(presented "$name")"
done

echo "== curl checks the name"
for name in example.com blog.example.org other.test; do
  if demo_run curl -sS --max-time 5 --cacert "$DEMO_TMP/ca.pem" --resolve "$name:$tls:127.0.0.1" \
       -o /dev/null "https://$name:$tls/" 2>"$DEMO_TMP/err"; then
    echo "https://$name/: verified, 200"
  else
    echo "https://$name/: refused by curl: $(sed -n "1s/^curl: //p" "$DEMO_TMP/err")"
  fi
done
