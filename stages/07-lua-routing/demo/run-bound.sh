#!/usr/bin/env bash
# What the time limit cannot cover: single long calls into C in
# demo/bound.lua (a huge string.rep, a backtracking pattern, three (.*) on
# long paths), and two ways out of the limit that are shut (jit, sethook).
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_backends
start_rsp demo/bound.lua
timed() {   # timed PATH [BODY]: status (and body) and time
  local out=/dev/null
  [ "${2:-}" = body ] && out=-
  demo_run curl -s -o "$out" -w "%{http_code} %{time_total}\n" "http://127.0.0.1:$port$1" |
    awk '/^[0-9][0-9][0-9] [0-9.]+$/ { printf "%s after %.1f s\n", $1, $2; next } { print }'
}
echo "\$ curl http://127.0.0.1:\$port/rep"; timed /rep body
echo "\$ curl http://127.0.0.1:\$port/pattern"; timed /pattern body
for n in 400 800; do
  p=/$(printf 'a/%.0s' $(seq $n))
  echo "\$ curl http://127.0.0.1:\$port/a/a/a/...      # ${#p} bytes"; timed "$p"
done
for p in /jit /unhook; do echo "\$ curl http://127.0.0.1:\$port$p"; timed "$p"; done
echo "rsp's log:"
rsp_log bound | grep "^[0-9]"   # each entry's first line, without its traceback
