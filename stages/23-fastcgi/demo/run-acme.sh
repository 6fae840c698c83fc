#!/usr/bin/env bash
# rsp gets its own certificate: pebble (Let's Encrypt's test CA) and
# pebble-challtestsrv (its DNS, answering 127.0.0.1 for every name) on
# free ports of 127.0.0.1, a backend, and rsp with tls.acme for one name,
# blog.test. Waits for "certificate obtained", then fetches the page over
# HTTPS trusting pebble's root only, shows status.json's certificates and
# what storage holds, and starts rsp again: it uses the stored certificate
# and places no new order.
# From stages/19-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
for tool in pebble pebble-challtestsrv openssl curl; do
  command -v "$tool" >/dev/null || demo_fail "this demo needs $tool (apt-get install pebble curl openssl)"
done
name=blog.test
w=$DEMO_TMP

# pebble's own API is HTTPS: a throwaway CA and a certificate for
# 127.0.0.1 from it (rsp trusts that CA through tls.acme.ca_root).
(
  cd "$w" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=demo-api-ca \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
      -keyout api-ca.key -out api-ca.pem &&
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
      -keyout api.key -out api.csr &&
    printf 'subjectAltName = IP:127.0.0.1\n' >api.ext &&
    openssl x509 -req -in api.csr -CA api-ca.pem -CAkey api-ca.key -set_serial 1 -days 2 \
      -extfile api.ext -out api.pem
) >"$w/openssl.log" 2>&1 || { cat "$w/openssl.log" >&2; demo_fail "openssl could not make pebble's certificate"; }

dns=$(demo_port) dns_admin=$(demo_port) api=$(demo_port) api_admin=$(demo_port)
http=$(demo_port) https=$(demo_port) status=$(demo_port) backend=$(demo_port)

demo_start dns pebble-challtestsrv -defaultIPv4 127.0.0.1 -defaultIPv6 "" -http01 "" -https01 "" \
  -tlsalpn01 "" -dns01 "127.0.0.1:$dns" -management "127.0.0.1:$dns_admin"
demo_wait_port "$dns_admin"
# pebble validates http-01 on rsp's plain port and tls-alpn-01 on its TLS
# port (a real CA uses 80 and 443).
cat >"$w/pebble.json" <<EOF
{"pebble": {"listenAddress": "127.0.0.1:$api", "managementListenAddress": "127.0.0.1:$api_admin",
 "certificate": "$w/api.pem", "privateKey": "$w/api.key", "httpPort": $http, "tlsPort": $https,
 "ocspResponderURL": "", "externalAccountBindingRequired": false}}
EOF
demo_start pebble env PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=0 PEBBLE_AUTHZREUSE=0 \
  pebble -config "$w/pebble.json" -dnsserver "127.0.0.1:$dns"
demo_wait_port "$api"
demo_wait_port "$api_admin"

demo_site
demo_static_backend "$backend"

cat >"$w/rsp.lua" <<EOF
listen = "127.0.0.1:$http"
status_listen = "127.0.0.1:$status"
sites = { ["$name"] = { backends = { "127.0.0.1:$backend" } } }
tls = {
  listen = "127.0.0.1:$https",
  acme = {
    agree_to_terms = true,
    email = "me@example.org",
    directory = "https://127.0.0.1:$api/dir",
    ca_root = "$w/api-ca.pem",
    storage = "$w/acme",
  },
}
EOF
echo "== rsp starts with no certificate at all"
demo_rsp rsp ./rsp "$w/rsp.lua"
rsp=${demo_pids[-1]}
# Ordering takes a second or two with pebble; bounded by DEMO_TIMEOUT.
until grep -qE 'certificate obtained|failed:' "$w/rsp.log"; do
  demo_alive "$rsp" || { cat "$w/rsp.log" >&2; demo_fail "rsp stopped"; }
  sleep 0.1
done
grep -E '^acme:|acme: ' "$w/rsp.log" | sed 's/^.*\(acme: \)/\1/'

echo "== the page over HTTPS, trusting pebble's root alone"
curl -sS --cacert "$w/api-ca.pem" "https://127.0.0.1:$api_admin/roots/0" >"$w/root.pem"
demo_run curl -sS --cacert "$w/root.pem" --resolve "$name:$https:127.0.0.1" \
  -w 'HTTP %{http_code}, certificate verified: %{ssl_verify_result} (0 is yes)\n' "https://$name:$https/"
echo | openssl s_client -connect "127.0.0.1:$https" -servername "$name" 2>/dev/null |
  openssl x509 -noout -subject -issuer -ext subjectAltName

echo "== status.json"
curl -sS "http://127.0.0.1:$status/status.json" |
  "$DEMO_PYTHON" -c 'import json, sys; [print(json.dumps(c)) for c in json.load(sys.stdin)["certificates"]]'

echo "== storage"
(cd "$w/acme" && find . -type f -printf '%m %P\n' | sort -k2)

echo "== rsp started again"
kill "$rsp"
wait "$rsp" 2>/dev/null
demo_rsp rsp-again ./rsp "$w/rsp.lua"
grep -E 'acme: ' "$w/rsp-again.log" | sed 's/^.*\(acme: \)/\1/'
echo "orders pebble accepted in all: $(grep -c 'Added order' "$w/pebble.log")"
