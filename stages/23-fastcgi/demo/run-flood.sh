#!/usr/bin/env bash
# A rapid reset flood (CVE-2023-44487): demo/flood.py opens HTTP/2 streams
# and cancels each at once (HEADERS + RST_STREAM, up to 2,000 pairs)
# against rsp's TLS listener, in front of tools/demo-http-server. rsp's
# budget for resets (200 at once, 33 more a second) runs out and it ends
# the connection with GOAWAY ENHANCE_YOUR_CALM; the backend sees next to
# nothing of the flood, another client is served as before, and rsp's log
# says why it sent the GOAWAY. PAIRS=150 demo/run-flood.sh stays within
# the budget (a browser leaving a page cancels up to 128 streams at once):
# no GOAWAY.
# From stages/20-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
for tool in openssl curl; do
  command -v "$tool" >/dev/null || demo_fail "this demo needs $tool (apt-get install openssl curl)"
done
"$DEMO_PYTHON" -c 'import h2' 2>/dev/null || demo_fail "this demo needs Python's h2 (apt-get install python3-h2)"
w=$DEMO_TMP

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$w/key.pem" -out "$w/cert.pem" \
  >"$w/openssl.log" 2>&1 || { cat "$w/openssl.log" >&2; demo_fail "openssl could not make a certificate"; }

demo_site
backend=$(demo_port) http=$(demo_port) https=$(demo_port)
demo_static_backend "$backend"
cat >"$w/rsp.lua" <<EOT
listen = "127.0.0.1:$http"
backends = { "127.0.0.1:$backend" }
tls = {
  listen = "127.0.0.1:$https",
  certificates = { { cert = "$w/cert.pem", key = "$w/key.pem" } },
}
EOT
demo_rsp rsp ./rsp "$w/rsp.lua"
demo_wait_port "$https"

pairs=${PAIRS:-2000}
echo "== the flood: streams opened and reset at once, 100 at a time, $pairs at most"
demo_run "$DEMO_PYTHON" demo/flood.py "$https" "$pairs" >"$w/flood.txt" ||
  { cat "$w/flood.txt" >&2; demo_fail "flood.py failed"; }
cat "$w/flood.txt"
taken=$(sed -n 's/^GOAWAY: .*, after \([0-9]*\) streams$/\1/p' "$w/flood.txt")
[ -z "$taken" ] || echo "rsp's GOAWAY came after at most 250 streams: $([ "$taken" -le 250 ] && echo yes || echo no)"

echo "== another client, after the flood"
demo_run curl -sk -o /dev/null -w 'curl --http2: HTTP/%{http_version} %{http_code}\n' --http2 "https://127.0.0.1:$https/index.html"
# The backend logs each request it answered ("GET /index.html 200"); the
# flood's asked for "/", and any would have been answered by now.
echo "requests of the flood that reached the backend: $(grep -c '^GET / ' "$w/backend.log")"

echo "== rsp's log"
if [ -n "$taken" ]; then
  demo_wait_line "$w/rsp.log" 'GOAWAY'
  grep 'GOAWAY' "$w/rsp.log" | sed 's/^[0-9-]* [0-9:]* //'
else
  echo "(no GOAWAY)"
fi
