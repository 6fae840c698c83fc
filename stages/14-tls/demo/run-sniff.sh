#!/usr/bin/env bash
# A password on the wire. rsp runs under strace (accept4 and read, every
# byte shown), in front of demo/backend.py. A client (demo/login.py)
# posts a login form, user=alice&password=hunter2, first to rsp's plain
# HTTP port (what stage 13 serves: its code is the same), then, in a
# second run, to its HTTPS port (tls.listen). demo/wire.py shows what rsp
# read from the client's socket each time, which is what crossed the
# network: the form in clear text, then TLS records only.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"
. demo/certs.sh
demo_ca
demo_cert www "/CN=www.example.com" "DNS:www.example.com"
a=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_wait_port "$a"

# run LABEL [TLS]: a fresh rsp under strace, one login, what rsp read.
run() {
  local port tls
  port=$(demo_port) tls=$(demo_port)
  cat >"$DEMO_TMP/$1.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$a" }
tls = {
  listen = "127.0.0.1:$tls",
  certificates = { { cert = "$DEMO_TMP/www.pem", key = "$DEMO_TMP/www.key" } },
}
LUA
  demo_rsp "rsp-$1" strace -f -qq -e trace=accept4,read -s 65536 -xx -o "$DEMO_TMP/$1.trace" \
    ./rsp "$DEMO_TMP/$1.lua"
  if [ "${2:-}" = tls ]; then
    echo "\$ python3 demo/login.py HTTPS-PORT www.example.com ca.pem"
    demo_run "$DEMO_PYTHON" demo/login.py "$tls" www.example.com "$DEMO_TMP/ca.pem"
  else
    echo "\$ python3 demo/login.py HTTP-PORT"
    demo_run "$DEMO_PYTHON" demo/login.py "$port"
  fi
  "$DEMO_PYTHON" demo/wire.py "$DEMO_TMP/$1.trace" password=hunter2
}

echo "== the login over plain HTTP"
run plain
echo "== the same login over HTTPS"
run https tls
