#!/usr/bin/env bash
# Why this chapter: chapter 10's rsp serves six requests of different
# kinds (demo/requests.py); then everything it wrote about them (its
# log, which says what it serves, not whom), the user it runs as and how
# many files it may open.
# From stages/11-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
old=$DEMO_TOOLS/../stages/10-reload/rsp
[ -x "$old" ] || demo_fail "build stage 10 first: make -C stages/10-reload"
backend=$(demo_port) port=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/backend.py a "$backend"
demo_wait_port "$backend"
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "$port" "$backend" >"$DEMO_TMP/rsp.lua"
demo_rsp rsp "$old" "$DEMO_TMP/rsp.lua"
pid=${demo_pids[-1]}

echo "== chapter 10's rsp: six requests"
demo_run "$DEMO_PYTHON" demo/requests.py "$port"
echo "-- all that rsp wrote, from its start to now:"
sed -E "s/^[0-9-]+ [0-9:]+ //; s|$DEMO_TMP/||g" "$DEMO_TMP/rsp.log"
echo "-- the process:"
uid=$(awk '/^Uid:/ { print $3 }' "/proc/$pid/status")
echo "runs as uid $uid ($(getent passwd "$uid" | cut -d: -f1)), may open $(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits") files"
