#!/usr/bin/env bash
# Slowloris against chapter 07's rsp and this chapter's, each limited to 64
# file descriptors: 80 clients that never finish their request head, and
# one ordinary request after three seconds.
# From stages/08-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
demo_site
backend=$(demo_port)
demo_static_backend "$backend"
for stage in 07 08; do
  port=$(demo_port)
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\nheader_timeout = 2.5\n' \
    "$port" "$backend" >"$DEMO_TMP/rsp$stage.lua"
  bin=./rsp
  [ "$stage" = 07 ] && bin=$DEMO_TOOLS/../stages/07-lua-routing/rsp
  echo "== stage $stage's rsp, at most 64 file descriptors"
  demo_rsp "rsp$stage" bash -c "ulimit -n 64 && exec $bin $DEMO_TMP/rsp$stage.lua"
  demo_start "slow$stage" "$DEMO_PYTHON" demo/slowloris.py "$port" 80 4
  sleep 3
  demo_run curl -s -o /dev/null -w "a normal request after 3 s: HTTP %{http_code}\n" "http://127.0.0.1:$port/"
  sleep 1.5
  cat "$DEMO_TMP/slow$stage.log"
done
