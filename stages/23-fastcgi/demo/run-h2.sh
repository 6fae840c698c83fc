#!/usr/bin/env bash
# HTTP/2 to clients: rsp with a TLS listener (a self-signed certificate
# made here with openssl) in front of tools/demo-http-server serving a page
# and 20 small files. Shows which protocol curl gets when it asks for
# HTTP/1.1 and for HTTP/2, how many connections rsp accepts for 20 files
# fetched at once over each (its TLS handshakes, from status.json), an
# h2load run of 100 requests 20 at a time on one connection, status.json's
# HTTP/2 figures once the clients have gone, and the access log's protocol
# field.
# From stages/20-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
for tool in openssl curl h2load; do
  command -v "$tool" >/dev/null || demo_fail "this demo needs $tool (apt-get install openssl curl nghttp2-client)"
done
w=$DEMO_TMP

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$w/key.pem" -out "$w/cert.pem" \
  >"$w/openssl.log" 2>&1 || { cat "$w/openssl.log" >&2; demo_fail "openssl could not make a certificate"; }

demo_site
for i in $(seq -w 1 20); do echo "file $i" >"$w/site/f$i.txt"; done
backend=$(demo_port) http=$(demo_port) https=$(demo_port) status=$(demo_port)
demo_static_backend "$backend"
cat >"$w/rsp.lua" <<EOF
listen = "127.0.0.1:$http"
status_listen = "127.0.0.1:$status"
access_log = "$w/access.log"
backends = { "127.0.0.1:$backend" }
tls = {
  listen = "127.0.0.1:$https",
  certificates = { { cert = "$w/cert.pem", key = "$w/key.pem" } },
}
EOF
demo_rsp rsp ./rsp "$w/rsp.lua"
demo_wait_port "$https"
base=https://127.0.0.1:$https

# status(EXPR): EXPR (Python) evaluated on status.json's document, d
status() {
  curl -sS "http://127.0.0.1:$status/status.json" |
    "$DEMO_PYTHON" -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
}
handshakes() { status 'd["tls_handshakes"]["ok"]'; }

echo "== one request, asking for HTTP/1.1 and then for HTTP/2 (ALPN)"
for v in 1.1 2; do
  demo_run curl -sk -A demo-curl "--http$v" -o /dev/null \
    -w "curl --http$v: HTTP/%{http_version} %{http_code}\n" "$base/"
done

echo "== 20 files at once (curl --parallel)"
urls=()
for i in $(seq -w 1 20); do urls+=(-o /dev/null "$base/f$i.txt"); done
for v in 1.1 2; do
  before=$(handshakes)
  demo_run curl -sk --no-progress-meter -A demo-curl "--http$v" --parallel --parallel-max 20 \
    -w '%{http_code} HTTP/%{http_version}\n' "${urls[@]}" >"$w/parallel.txt"
  answers=$(sort "$w/parallel.txt" | uniq -c | awk '{ printf "%s%d x %s %s", (NR > 1 ? ", " : ""), $1, $3, $2 }')
  echo "curl --http$v: $answers; connections rsp accepted: $(($(handshakes) - before))"
done

echo "== h2load: 100 requests, 20 streams at a time, one client"
before=$(handshakes)
demo_run h2load -n 100 -c 1 -m 20 -H 'user-agent: demo-h2load' "$base/index.html" >"$w/h2load.txt" 2>&1 ||
  { cat "$w/h2load.txt" >&2; demo_fail "h2load failed"; }
grep -E '^(Application protocol|requests|status codes):' "$w/h2load.txt"
echo "connections rsp accepted: $(($(handshakes) - before))"

echo "== status.json, once the clients have gone"
# The last connection may still be closing: wait for it (10 s at most).
for ((i = 0; i < 100; i++)); do
  [ "$(status 'd["http2"]["connections"]')" = 0 ] && break
  sleep 0.1
done
status '"requests_by_protocol: %s\nhttp2: %s\ntls_handshakes: %s" % (json.dumps(d["requests_by_protocol"]), json.dumps(d["http2"]), json.dumps(d["tls_handshakes"]))'
echo "== rsp's access log"
# rsp writes its log lines within a second: wait for the last (10 s at most).
total=$(status 'd["requests_total"]')
for ((i = 0; i < 100; i++)); do
  [ "$(wc -l <"$w/access.log")" -ge "$total" ] && break
  sleep 0.1
done
grep -m 1 ' HTTP/1.1"' "$w/access.log"
grep -m 1 ' HTTP/2.0"' "$w/access.log"
echo "lines in all: $(wc -l <"$w/access.log"), HTTP/2.0: $(grep -c ' HTTP/2.0"' "$w/access.log"), HTTP/1.1: $(grep -c ' HTTP/1.1"' "$w/access.log")"

