#!/usr/bin/env bash
# balance = "hash" with hash_key = "header:X-User": four small backends
# (A, B, C, D, each a directory served by tools/demo-http-server), twelve
# users, and which backend each lands on; the same users again; then
# backend C stopped, and which users moved. Which backend a user gets
# depends on the backends' names, here 127.0.0.1 and a port chosen for
# this run, so the letters differ from run to run; the verdicts do not.
# From stages/23-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v curl >/dev/null || demo_fail "this demo needs curl (apt-get install curl)"
w=$DEMO_TMP

declare -A pid_of
names=()
for letter in A B C D; do
  port=$(demo_port)
  mkdir -p "$w/$letter"
  echo "$letter" >"$w/$letter/index.html"
  demo_start "backend-$letter" "$DEMO_PYTHON" "$DEMO_TOOLS/demo-http-server" "$port" "$w/$letter"
  pid_of[$letter]=${demo_pids[-1]}
  demo_wait_port "$port"
  names+=("\"127.0.0.1:$port\"")
done
http=$(demo_port) status=$(demo_port)
cat >"$w/rsp.lua" <<LUA
listen = "127.0.0.1:$http"
status_listen = "127.0.0.1:$status"
backends = { $(IFS=,; echo "${names[*]}" | sed 's/,/, /g') }
balance = "hash"
hash_key = "header:X-User"
LUA
demo_rsp rsp ./rsp "$w/rsp.lua"

users=(ann bob cy dee eve fay gus hal ida jo kim lee)
# ask FILE: each user's backend, one line each, into FILE.
ask() {
  local u
  for u in "${users[@]}"; do
    echo "$u $(demo_run curl -sS -H "X-User: $u" "http://127.0.0.1:$http/")"
  done >"$1"
}

echo "== twelve users, four backends"
ask "$w/first"
for letter in A B C D; do
  echo "$letter: $(awk -v l="$letter" '$2 == l { printf "%s%s", n++ ? " " : "", $1 } END { if (!n) printf "(nobody)" }' "$w/first")"
done
ask "$w/again"
cmp -s "$w/first" "$w/again" && echo "asked again: every user on the same backend" ||
  echo "asked again: SOME USERS MOVED"
echo "== status.json says"
demo_run curl -sS "http://127.0.0.1:$status/status.json" | grep -o '"balance": "hash", "hash_key": "[^"]*"'

echo "== backend C stopped"
kill "${pid_of[C]}"
wait "${pid_of[C]}" 2>/dev/null
ask "$w/after"
echo "moved: $(join "$w/first" "$w/after" | awk '$2 != $3 { printf "%s%s to %s", n++ ? ", " : "", $1, $3 } END { if (!n) printf "nobody" }')"
wrong=$(join "$w/first" "$w/after" | awk '($2 == "C") != ($2 != $3)' | wc -l)
[ "$wrong" = 0 ] && echo "C's users moved, and nobody else did" || echo "$wrong USERS DID NOT KEEP THE RULE"
echo "stayed where they were: $(join "$w/first" "$w/after" | awk '$2 == $3' | wc -l) of 12"
echo "== rsp's log"
grep -E 'backend .*(refused|down)' "$DEMO_TMP/rsp.log" | sed 's/^[0-9-]* [0-9:]* //' | head -n 2
