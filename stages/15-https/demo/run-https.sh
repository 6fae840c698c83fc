#!/usr/bin/env bash
# HTTPS for real: rsp serves HTTP and HTTPS on two ports of 127.0.0.1 for
# www.example.com (a certificate from a throwaway CA: demo/certs.sh), with
# redirect_http, hsts and acme_webroot. Then: a plain GET (a 301 to
# https://), a plain POST (a 308), curl following that 308 with its POST
# intact, an HTTPS response and its Strict-Transport-Security header, and
# ACME challenges on the plain port (answered from the webroot, never
# redirected). www.example.com is resolved to 127.0.0.1 by curl --resolve.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
. demo/certs.sh
demo_ca
demo_cert www "/CN=www.example.com" "DNS:www.example.com,DNS:example.com"
a=$(demo_port) port=$(demo_port) tls=$(demo_port)
challenges=$DEMO_TMP/acme/.well-known/acme-challenge
mkdir -p "$challenges"
token=Dn4q7kT0bR9wXy2Zs1LmPaE6vC3uHgJ8NfQ5oKiW_-s   # what certbot would write
printf '%s.demo-thumbprint' "$token" >"$challenges/$token"
ln -s /etc/hostname "$challenges/escape"             # a way out of the webroot
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_wait_port "$a"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$a" }
acme_webroot = "$DEMO_TMP/acme"
tls = {
  listen = "127.0.0.1:$tls",
  certificates = { { cert = "$DEMO_TMP/www.pem", key = "$DEMO_TMP/www.key" } },
  redirect_http = true,
  hsts = 300,
}
LUA
echo "\$ cat rsp.lua"
sed "s|$DEMO_TMP|/tmp/rsp-demo.XXXXXX|g" "$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
resolve=(--resolve "www.example.com:$tls:127.0.0.1" --resolve "www.example.com:$port:127.0.0.1")

echo "== plain HTTP: a GET is sent to HTTPS"
echo "\$ curl -i http://www.example.com:$port/hello?x=1"
demo_run curl -s --max-time 5 "${resolve[@]}" -D - -o /dev/null "http://www.example.com:$port/hello?x=1" |
  tr -d '\r' | grep -E '^(HTTP|Location)'

echo "== a POST gets a 308: the client must send it again as it was"
echo "\$ curl -i -d user=alice&password=hunter2 http://www.example.com:$port/login"
demo_run curl -s --max-time 5 "${resolve[@]}" -D - -o /dev/null -d 'user=alice&password=hunter2' \
  "http://www.example.com:$port/login" | tr -d '\r' | grep -E '^(HTTP|Location)'
echo "\$ curl -L --cacert ca.pem -d user=alice&password=hunter2 http://www.example.com:$port/login"
demo_run curl -s --max-time 5 -L --cacert "$DEMO_TMP/ca.pem" "${resolve[@]}" -d 'user=alice&password=hunter2' \
  "http://www.example.com:$port/login"

echo "== over HTTPS: the backend's answer, and rsp's HSTS line"
echo "\$ curl -i --cacert ca.pem https://www.example.com:$tls/hello?x=1"
demo_run curl -s --max-time 5 --cacert "$DEMO_TMP/ca.pem" "${resolve[@]}" -D - \
  "https://www.example.com:$tls/hello?x=1" | grep -v '^Date:' | tr -d '\r'

echo "== ACME challenges on the plain port: answered by rsp, never redirected"
for name in "$token" nosuchtoken escape not.a.token; do
  result=$(demo_run curl -s --max-time 5 "${resolve[@]}" -o "$DEMO_TMP/got" -w '%{http_code} %{content_type}' \
    "http://www.example.com:$port/.well-known/acme-challenge/$name")
  case $result in
    200*) echo "$name: $result: $(cat "$DEMO_TMP/got")" ;;
    *) echo "$name: ${result%% *}" ;;
  esac
done
