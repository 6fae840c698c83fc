#!/usr/bin/env bash
# One request through rsp, traced with strace: how a non-blocking connect
# looks to the kernel. (epoll's user data and the requests' details are
# left out of the trace; fd 6 is the client, fd 7 the backend.)
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"
alpha=$(demo_port)
start_backend alpha "$alpha"
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$proxy" "$alpha" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp strace -o "$DEMO_TMP/trace" -e trace=accept4,socket,connect,epoll_ctl,epoll_wait,getsockopt,read \
  ./rsp "$DEMO_TMP/rsp.lua"
echo "\$ curl -s http://127.0.0.1:$proxy/"
demo_run curl -s "http://127.0.0.1:$proxy/"
sleep 0.3
"$DEMO_PYTHON" - "$DEMO_TMP/trace" <<'PY'
import re, sys
lines = [re.sub(r"\s+= ", " = ", l.rstrip("\n")) for l in open(sys.argv[1])]
start = next(i for i, l in enumerate(lines) if l.startswith("accept4(") and not "EAGAIN" in l)
shown = 0
for line in lines[start:]:
    line = re.sub(r", data=\{[^}]*\}", "", line)             # epoll's user data: a pointer
    line = re.sub(r'(read\(6, ".{0,20})[^"]*"(\.\.\.)?, 16384\) = \d+', r'\1"..., 16384) = ...', line)
    print(line)
    shown += 1
    if line.startswith("read(6"):
        break
PY
