#!/usr/bin/env bash
# A certificate renewed under a running rsp. rsp (workers = 2) serves
# www.example.com with a certificate whose subject says O=first. A client
# (demo/holder.py) opens a keep-alive HTTPS connection and keeps it. The
# certificate and key files are then overwritten with new ones (O=second),
# as certbot's deploy hook would, and rsp gets SIGHUP. Then: the same
# processes, the old connection still served, a new connection shown
# the new certificate, and a session ticket from before the reload still
# accepted. Last, a reload with a key that does not match its
# certificate: refused, and the certificate in service stays.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
. demo/certs.sh
demo_ca
demo_cert www "/O=first/CN=www.example.com" "DNS:www.example.com"
demo_cert renewed "/O=second/CN=www.example.com" "DNS:www.example.com"
demo_cert other "/O=third/CN=www.example.com" "DNS:www.example.com"
a=$(demo_port) port=$(demo_port) tls=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_wait_port "$a"
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$a" }
workers = 2
tls = {
  listen = "127.0.0.1:$tls",
  certificates = { { cert = "$DEMO_TMP/www.pem", key = "$DEMO_TMP/www.key" } },
}
LUA
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
master=${demo_pids[-1]}
log=$DEMO_TMP/rsp.log

# The pids of the master's children (its workers), sorted.
workers() {
  ps -o pid= --ppid "$master" | sort -n | tr -d ' ' | tr '\n' ' '
}
# Waits (10 s at most) until the log has N lines matching REGEX.
wait_for_line() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ "$(grep -cE "$2" "$log")" -ge "$1" ] && return 0
    sleep 0.1
  done
  demo_fail "rsp did not log '$2' $1 time(s)"
}
# rsp's log lines since the last call, without dates and temporary paths.
seen=0
new_lines() {
  local total
  total=$(wc -l <"$log")
  tail -n "+$((seen + 1))" "$log" | head -n "$((total - seen))" |
    sed -E "s/^[0-9-]+ [0-9:]+ //; s|$DEMO_TMP/||g" | grep -E 'SIGHUP|reload|setting' | grep -v 'worker'
  seen=$total
}
# The subject of the certificate a new connection gets.
presented() {
  demo_run openssl s_client -connect "127.0.0.1:$tls" -servername www.example.com </dev/null 2>/dev/null |
    openssl x509 -noout -subject -nameopt oneline 2>/dev/null | sed 's/^subject=//'
}
sleep 0.3            # "Started." comes once the workers are forked: let them reach epoll_wait
before=$(workers)
new_lines >/dev/null

echo "== rsp serves: $(presented)"
demo_start client "$DEMO_PYTHON" demo/holder.py "$tls" www.example.com "$DEMO_TMP/ca.pem" "$DEMO_TMP/go"
client=${demo_pids[-1]}
for ((i = 0; i < 100; i++)); do
  grep -qs '^ready' "$DEMO_TMP/client.log" && break
  demo_alive "$client" || break
  sleep 0.1
done
grep -qs '^ready' "$DEMO_TMP/client.log" || { cat "$DEMO_TMP/client.log" >&2; demo_fail "the client is not ready"; }
grep -v '^ready' "$DEMO_TMP/client.log"

echo "== the renewed certificate and key are copied over the old files; kill -HUP"
cp "$DEMO_TMP/renewed.pem" "$DEMO_TMP/www.pem"
cp "$DEMO_TMP/renewed.key" "$DEMO_TMP/www.key"
kill -HUP "$master"
wait_for_line 2 'worker [0-9]: config reloaded: generation 2'
new_lines
echo "the same master and workers: $([ "$(workers)" = "$before" ] && demo_alive "$master" && echo yes || echo no)"
touch "$DEMO_TMP/go"
wait "$client"
grep -v '^ready' "$DEMO_TMP/client.log" | tail -n +2

echo "== a key that does not match its certificate; kill -HUP"
cp "$DEMO_TMP/other.key" "$DEMO_TMP/www.key"
kill -HUP "$master"
wait_for_line 1 'reload failed'
new_lines
echo "rsp serves: $(presented)"
