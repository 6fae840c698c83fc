#!/usr/bin/env bash
# A 16 MiB download through rsp, spliced, then copied. A backend
# (demo/backend.py) serves a file of 16 MiB of random-looking bytes with
# a Content-Length; rsp has a status listener and `splice = true`. curl
# downloads the file once with rsp under strace -c (after a small
# request that opens rsp's pooled connection to the backend); then the config says
# `splice = false`, rsp reloads (SIGHUP), and curl downloads it again,
# under strace -c too. Between the two, a client that stops reading
# (demo/stall.py) holds a pipe until it hangs up. For each download: the download's sha256 against the
# file's, status.json's "splice" figures, and the system calls rsp made.
# From stages/16-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"

demo_site
demo_file big 16
b=$(demo_port) port=$(demo_port) status=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/backend.py "$b" "$DEMO_TMP/site"
demo_wait_port "$b"
# config SPLICE: writes rsp.lua with splice = SPLICE
config() {
  cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$b" }
status_listen = "127.0.0.1:$status"
splice = $1
LUA
}
config true
echo "\$ cat rsp.lua"
cat "$DEMO_TMP/rsp.lua"
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
pid=${demo_pids[-1]}
want=$(sha256sum <"$DEMO_TMP/site/big" | cut -c1-64)

# status.json's "splice" object, as rsp writes it
splice_figures() {
  curl -s --max-time 5 "http://127.0.0.1:$status/status.json" | grep -o '"splice": {[^}]*}'
}
# waits (5 s at most) until status.json says "pipes": 0
no_pipes() {
  local i
  for ((i = 0; i < 50; i++)); do
    splice_figures | grep -q '"pipes": 0}' && return 0
    sleep 0.1
  done
  return 1
}
# download NAME: GET /big with curl, rsp under strace -c for the download
download() {
  local spid
  demo_start "strace-$1" strace -c -f -o "$DEMO_TMP/$1.strace" -p "$pid"
  spid=${demo_pids[-1]}
  demo_wait_line "$DEMO_TMP/strace-$1.log" 'attached'
  echo "\$ curl -s -o big http://127.0.0.1:$port/big"
  demo_run curl -s --max-time 20 -o "$DEMO_TMP/got" "http://127.0.0.1:$port/big" || demo_fail "curl failed"
  kill -INT "$spid"
  wait "$spid"
  got=$(sha256sum <"$DEMO_TMP/got" | cut -c1-64)
  echo "$(stat -c %s "$DEMO_TMP/got") bytes, sha256 ${got:0:16}...: $([ "$got" = "$want" ] && echo "the file's" || echo "NOT the file's")"
}
# spliced: status.json's figures, and what share of the 16 MiB body they are
spliced() {
  local figures bytes
  figures=$(splice_figures)
  bytes=$(echo "$figures" | sed -E 's/.*"bytes": ([0-9]+).*/\1/')
  echo "status.json: $figures"
  echo "  spliced: $(awk -v b="$bytes" 'BEGIN { printf "%.1f", 100 * b / 16777216 }') % of the body"
}

echo "== before any request"
echo "status.json: $(splice_figures)"
# A small request first: rsp's pooled backend connection is then open,
# and the counts below are the downloads' alone.
demo_run curl -s --max-time 5 -o /dev/null "http://127.0.0.1:$port/index.html" || demo_fail "curl failed"
echo "== splice = true"
download on
no_pipes || echo "(a pipe is still open)"
spliced
first=$(splice_figures)

echo "== a client that reads 1 MiB of the file, then stops reading"
demo_start stall "$DEMO_PYTHON" demo/stall.py "$port" /big 1048576 "$DEMO_TMP/go"
demo_wait_line "$DEMO_TMP/stall.log" 'stopped|stall.py'
cat "$DEMO_TMP/stall.log"
sleep 0.5
figures=$(splice_figures)
echo "status.json: $figures"
moved=$(($(echo "$figures" | sed -E 's/.*"bytes": ([0-9]+).*/\1/') - $(echo "$first" | sed -E 's/.*"bytes": ([0-9]+).*/\1/')))
echo "  spliced for it: $(awk -v b="$moved" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of 16: $(
  [ "$moved" -lt 16777216 ] && echo "rsp has stopped reading the backend" || echo "all of it")"
touch "$DEMO_TMP/go"
echo "it hangs up:"
no_pipes || echo "(a pipe is still open)"
echo "status.json: $(splice_figures)"
before=$(splice_figures | sed -E 's/.*"bytes": ([0-9]+).*/\1/')

echo "== splice = false, then kill -HUP"
config false
kill -HUP "$pid"
demo_wait_line "$DEMO_TMP/rsp.log" 'reloaded'
sed -nE 's/^[0-9-]+ [0-9:]+ (rsp: .*reload.*)/\1/p' "$DEMO_TMP/rsp.log" | sed "s|$DEMO_TMP/||g"
download off
no_pipes || echo "(a pipe is still open)"
after=$(splice_figures | sed -E 's/.*"bytes": ([0-9]+).*/\1/')
echo "status.json: $(splice_figures)"
echo "  spliced since the reload: $((after - before)) bytes"

echo "== what rsp did for one download (strace -c), splice = true and false"
"$DEMO_PYTHON" demo/calls.py count 1 --timing all \
  --rows splice,read,write,writev,epoll_wait,epoll_ctl,pipe2,close on="$DEMO_TMP/on.strace" off="$DEMO_TMP/off.strace" |
  sed '1s/calls per request/calls per download/; s/stage on/splice on/; s/stage off/splice off/'
