#!/usr/bin/env bash
# A request head sent one byte per write (demo/drip.py), to rsp under
# strace: the parser resumes after every read and routes it all the same.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"
alpha=$(demo_port) bravo=$(demo_port) charlie=$(demo_port)
for b in alpha bravo charlie; do demo_start "$b" "$DEMO_PYTHON" demo/backend.py "$b" "${!b}"; done
for b in alpha bravo charlie; do demo_wait_port "${!b}"; done
sed -e "s/\b8000\b/$proxy/; s/\b8001\b/$alpha/; s/\b8002\b/$bravo/; s/\b8003\b/$charlie/" \
  demo/rsp.lua >"$DEMO_TMP/rsp.lua"
demo_rsp rsp strace -o "$DEMO_TMP/trace" -e trace=accept4,read ./rsp "$DEMO_TMP/rsp.lua"
echo "\$ python3 demo/drip.py $proxy"
demo_run "$DEMO_PYTHON" demo/drip.py "$proxy"
sleep 0.3
"$DEMO_PYTHON" - "$DEMO_TMP/trace" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
start, fd = next((i, m.group(1)) for i, l in enumerate(lines) if (m := re.match(r"accept4\(\d+, .*\)\s+= (\d+)$", l)))
sizes = [int(m.group(1)) for l in lines[start:] if (m := re.match(r"read\(%s, .*\)\s+= (\d+)$" % fd, l))]
head = [n for n in sizes if n > 0]
print(f"rsp read the {sum(head)}-byte head in {len(head)} read() calls;",
      "a byte or two at a time:", "yes" if max(head) <= 3 else f"no, up to {max(head)}")
PY
