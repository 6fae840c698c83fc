#!/usr/bin/env bash
# System calls per request, counted with strace -c, for this stage's rsp
# and, when it is built, for stage 15's, side by side. A backend
# (demo/backend.py) serves a 600-byte page; a client (demo/load.py) asks
# for it 2000 times on one keep-alive connection, then 300 times on a new
# connection each, one request at a time; strace is attached to rsp
# (strace -c -p PID) only while those requests run, so that the counts
# divide exactly. Then one keep-alive request, call by call
# (strace -yy), for each stage.
# From stages/16-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"

# Stage 15's binary, from stages/16-* (../15-https) or from src (../stages/15-https).
old=../15-https/rsp
[ -x "$old" ] || old=../stages/15-https/rsp
demo_site
head -c 600 /dev/zero | tr '\0' 'x' >"$DEMO_TMP/site/page.html"
b=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/backend.py "$b" "$DEMO_TMP/site"
demo_wait_port "$b"

# start_rsp LABEL BINARY: rsp in front of the backend; sets port and pid.
start_rsp() {
  port=$(demo_port)
  cat >"$DEMO_TMP/$1.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$b" }
keepalive_requests = 1000000
LUA
  demo_rsp "rsp-$1" "$2" "$DEMO_TMP/$1.lua"
  pid=${demo_pids[-1]}
}


# measure NAME N MODE STRACE-OPTIONS...: the client's N requests (MODE
# keepalive or close) with strace attached to rsp ($pid) for them alone.
measure() {
  local name=$1 n=$2 mode=$3 spid
  shift 3
  rm -f "$DEMO_TMP/go" "$DEMO_TMP/end"
  demo_start "client-$name" "$DEMO_PYTHON" demo/load.py "$port" /page.html "$n" "$mode" \
    "$DEMO_TMP/go" "$DEMO_TMP/end"
  demo_wait_line "$DEMO_TMP/client-$name.log" '^ready'
  demo_start "strace-$name" strace "$@" -o "$DEMO_TMP/$name.strace" -p "$pid"
  spid=${demo_pids[-1]}
  demo_wait_line "$DEMO_TMP/strace-$name.log" 'attached'
  touch "$DEMO_TMP/go"
  demo_wait_line "$DEMO_TMP/client-$name.log" '^done|load.py'
  grep -q '^done' "$DEMO_TMP/client-$name.log" || demo_fail "$(cat "$DEMO_TMP/client-$name.log")"
  kill -INT "$spid"
  wait "$spid"
  touch "$DEMO_TMP/end"
  sleep 0.2
}

labels=()
[ -x "$old" ] && labels+=(15)
labels+=(16)
for label in "${labels[@]}"; do
  if [ "$label" = 15 ]; then start_rsp 15 "$old"; else start_rsp 16 ./rsp; fi
  measure "ka-$label" 2000 keepalive -c -f
  measure "new-$label" 300 close -c -f
  measure "one-$label" 1 keepalive -f -yy
  ports[$label]=$port
done
[ -x "$old" ] || echo "(stage 15 is not built: make -C ../15-https for its column)"

columns() {
  local label
  for label in "${labels[@]}"; do printf '%s=%s ' "$label" "$DEMO_TMP/$1-$label.strace"; done
}
echo "== 2000 requests on one keep-alive connection (a 600-byte page), one at a time"
# shellcheck disable=SC2046
"$DEMO_PYTHON" demo/calls.py count 2000 $(columns ka)
echo "== 300 requests, each on a new connection (Connection: close)"
# shellcheck disable=SC2046
"$DEMO_PYTHON" demo/calls.py count 300 --timing epoll_wait $(columns new)
for label in "${labels[@]}"; do
  echo "== one keep-alive request, call by call: stage $label"
  "$DEMO_PYTHON" demo/calls.py trace "${ports[$label]}" "$b" "$DEMO_TMP/one-$label.strace"
done
