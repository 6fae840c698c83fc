#!/usr/bin/env bash
# One request with Connection: close (demo/close.py), under strace: the
# system calls rsp makes on the client's socket, from accept4 to close
# (but its writes, which differ from run to run in how the answer is cut).
# The client reads the answer and its end of file, then keeps its socket
# open a second more. First stage 17 (../17-buffering/rsp), then this
# stage's rsp.
# From stages/18-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"
stage17=$(ls -d "$PWD"/../17-*/rsp "$PWD"/../stages/17-*/rsp 2>/dev/null | head -n 1)
[ -x "$stage17" ] || demo_fail "build stage 17 first: make -C stages/17-buffering"

b=$(demo_port)
demo_site
demo_static_backend "$b"

# through NAME BINARY: rsp under strace, one request, the client fd's calls
through() {
  local port pid fd tracer
  port=$(demo_port)
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$b" >"$DEMO_TMP/$1.lua"
  demo_rsp "$1" "$2" "$DEMO_TMP/$1.lua"
  pid=${demo_pids[-1]}
  demo_start strace strace -qq -o "$DEMO_TMP/$1.trace" -e trace=accept4,read,shutdown,ioctl,close,epoll_ctl -p "$pid"
  tracer=${demo_pids[-1]}
  demo_wait_line "/proc/$pid/status" 'TracerPid:[[:space:]]*[1-9]'
  echo "== $1"
  demo_run "$DEMO_PYTHON" demo/close.py "$port" "$pid"
  sleep 0.2
  kill "$tracer"
  wait "$tracer" 2>/dev/null
  fd=$(grep -m1 -oE '^accept4\(.*= [0-9]+' "$DEMO_TMP/$1.trace" | grep -oE '[0-9]+$')
  echo "rsp, on the client's socket (fd $fd):"
  grep -E "^[a-z0-9_]+\(($fd|[0-9]+, [A-Z_|]*EPOLL_CTL_[A-Z]+, $fd)[,)]|^accept4.* = $fd\$" "$DEMO_TMP/$1.trace" |
    sed -E 's/^/  /; s/"(.{0,20})[^"]*"(\.\.\.)?/"\1"…/; s/\{sa_family.*\}, \[/{…}, [/; s/data=\{[^}]*\}/data=…/'
}
through "stage 17" "$stage17"
through "stage 18" ./rsp
