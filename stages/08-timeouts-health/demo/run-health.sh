#!/usr/bin/env bash
# Active health checks: two backends checked every 0.3 s (down after two
# failures in a row, up after two passes). We make one fail its checks,
# then both, then bring them back one by one, and send a few requests each
# time. In the log, alpha and bravo stand for their addresses.
# From stages/08-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
alpha=$(demo_port) bravo=$(demo_port) port=$(demo_port)
for b in alpha bravo; do
  demo_start "$b" bash -c "cd '$DEMO_TMP' && exec '$DEMO_PYTHON' '$PWD/demo/backend.py' $b ${!b}"
  demo_wait_port "${!b}"
done
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:$alpha", "127.0.0.1:$bravo" }
health_check = { path = "/healthz", interval = 0.3, timeout = 0.3, rise = 2, fall = 2 }
LUA
demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
requests() {
  local i answers=()
  for ((i = 0; i < $1; i++)); do
    answers+=("$(demo_run curl -s -w ' %{http_code}' "http://127.0.0.1:$port/" | tr -d '\n' | sed 's/^.*\(alpha\|bravo\) /\1 /; s/^<.*> //')")
  done
  printf '  %s\n' "$(IFS=,; echo "${answers[*]}" | sed 's/,/, /g')"
}
echo "both healthy:"
requests 4
echo 503 >"$DEMO_TMP/bravo.health"
sleep 1.2
echo "bravo's /healthz answers 503:"
requests 4
echo 503 >"$DEMO_TMP/alpha.health"
sleep 1.2
echo "alpha's too:"
requests 2
rm "$DEMO_TMP/alpha.health"
sleep 1.2
echo "alpha healthy again:"
requests 2
rm "$DEMO_TMP/bravo.health"
sleep 1.2
echo "bravo too:"
requests 4
echo "--- rsp's log:"
sed -E "s/^[0-9-]+ [0-9:]+ //; s/127\.0\.0\.1:$alpha/alpha/; s/127\.0\.0\.1:$bravo/bravo/" "$DEMO_TMP/rsp.log" |
  grep -v '^Started\|listening on\|default site'
