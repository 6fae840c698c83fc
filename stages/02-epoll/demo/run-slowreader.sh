#!/usr/bin/env bash
# slowreader.py fetches an 11 MiB file with a 4 KiB receive buffer after a
# one-second nap: straight from the backend, then through this stage's rsp,
# traced with strace to count the writes the kernel refused.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
command -v strace >/dev/null || demo_fail "this demo needs strace (apt-get install strace)"
demo_site
demo_file big.bin 11
backend=$(demo_port) proxy=$(demo_port)
demo_static_backend "$backend"
demo_rsp rsp strace -o "$DEMO_TMP/trace" -e trace=write ./rsp "$proxy" 127.0.0.1 "$backend"
whole=$(curl -s -o /dev/null -w '%{size_header} + %{size_download}' \
  "http://127.0.0.1:$backend/big.bin" | awk '{ print $1 + $3 }')
echo "the whole answer: $whole bytes (headers and 11 MiB of body)"
echo "\$ python3 demo/slowreader.py $backend      # straight to the backend"
demo_run "$DEMO_PYTHON" demo/slowreader.py "$backend" || demo_fail "slowreader.py failed"
echo "\$ python3 demo/slowreader.py $proxy      # through rsp"
out=$(demo_run "$DEMO_PYTHON" demo/slowreader.py "$proxy") || demo_fail "slowreader.py failed"
echo "$out"
got=${out//[!0-9]/}
if [ "$got" -lt "$whole" ]; then echo "lost on the way: $((whole - got)) bytes"; else echo "lost on the way: nothing"; fi
sleep 0.3
"$DEMO_PYTHON" - "$DEMO_TMP/trace" <<'PY'
import re, sys
writes = [re.sub(r'".*"(\.\.\.)?', '""...', re.sub(r"\s+= ", " = ", l.rstrip("\n")))
          for l in open(sys.argv[1]) if l.startswith("write(6,")]
short = [l for l in writes if (m := re.search(r", (\d+)\) = (\d+)$", l)) and m.group(1) != m.group(2)]
refused = [l for l in writes if "EAGAIN" in l]
print(f"rsp's writes to the client (fd 6): {len(writes)}; short: {len(short)}; refused with EAGAIN: {len(refused)}")
print(f"  the first short write:   {short[0] if short else 'none'}")
print(f"  the first refused write: {refused[0] if refused else 'none'}")
PY
