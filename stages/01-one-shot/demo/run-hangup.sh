#!/usr/bin/env bash
# A client asks for 8 MiB, reads 1000 bytes and hangs up (hangup.py). rsp,
# traced with strace, gets EPIPE from its next write instead of dying of
# SIGPIPE, closes both sockets and serves the next client.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"
demo_site
demo_file big8.bin 8
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
demo_rsp rsp strace -o "$DEMO_TMP/trace" -e trace=write,close,shutdown ./rsp "$proxy" 127.0.0.1 "$backend"
echo "\$ python3 demo/hangup.py $proxy"
demo_run "$DEMO_PYTHON" demo/hangup.py "$proxy" || demo_fail "hangup.py failed"
sleep 0.5
echo "what strace saw rsp do (fd 4: the client, fd 5: the backend):"
"$DEMO_PYTHON" - "$DEMO_TMP/trace" <<'PY'
import re, sys
lines, started = [], False
for line in open(sys.argv[1]):
    line = re.sub(r"\s+= ", " = ", line.rstrip("\n"))
    started = started or line.startswith('write(5, "GET ')
    if started and re.match(r"(write|shutdown|close)\([45][,)]|--- SIGPIPE", line):
        lines.append(line)
        if line.startswith("close(4)"):
            break
# The successful writes to the client: the first as it is, the rest counted
# (how many fit before the reset arrives differs from run to run).
ok = [i for i, l in enumerate(lines) if re.match(r"write\(4, .*\) = \d+$", l)]
for i, line in enumerate(lines):
    if ok and i == ok[0]:
        print("  " + line)
        print(f"  ... and {len(ok) - 1} more complete write(s) to the client ...")
    elif i not in ok:
        print("  " + re.sub(r"^write\(4, .*\) = -1", "write(4, ...) = -1", line))
PY
if demo_alive "$(pgrep -f "^./rsp $proxy " | head -n 1)"; then
  echo "rsp is still running; the next client gets: $(curl -si "http://127.0.0.1:$proxy/" | head -n 1)"
else
  echo "rsp has died"
fi
