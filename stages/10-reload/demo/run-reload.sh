#!/usr/bin/env bash
# Reloading under load. rsp starts with backends = { a }; four clients
# (demo/load.py: two on keep-alive connections, two with a new connection
# per request) send GETs for four seconds, while the config is rewritten
# nine times, alternating between { b } and { a } with one broken version
# among them, and rsp gets a SIGHUP after each. A slow request (a takes
# 2 s over it) is sent before the first reload. Then: rsp's log lines
# about the reloads, what the clients saw, and whether the process and its
# listening socket are the ones it started with. Last, a reload that moves
# `listen` to another port.
# From stages/10-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
a=$(demo_port) b=$(demo_port) port=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" demo/backend.py a "$a"
demo_start backend-b "$DEMO_PYTHON" demo/backend.py b "$b"
demo_wait_port "$a"
demo_wait_port "$b"
config=$DEMO_TMP/rsp.lua
write_config() {     # write_config BACKEND_PORT [LISTEN_PORT]
  printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\n' "${2:-$port}" "$1" >"$config"
}

# The inode of the socket listening on PORT, if process PID holds it.
listening_inode() {
  local inode
  inode=$(awk -v p=":$(printf '%04X' "$2")" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' /proc/net/tcp)
  [ -n "$inode" ] && ls -l "/proc/$1/fd" 2>/dev/null | grep -q "socket:\[$inode\]" && echo "$inode"
}

write_config "$a"
demo_rsp rsp ./rsp "$config"
pid=${demo_pids[-1]}
inode=$(listening_inode "$pid" "$port")
[ -n "$inode" ] || demo_fail "rsp holds no socket listening on port $port"
echo "rsp is running: pid $pid, listening socket inode $inode"

demo_start slow "$DEMO_PYTHON" demo/get.py "$port" "/?delay=2" "a slow request sent before the first reload"
slow=${demo_pids[-1]}
demo_start load "$DEMO_PYTHON" demo/load.py "$port" 4
load=${demo_pids[-1]}
sleep 0.3
for to in b a b broken a b a b a; do
  case $to in
    a) write_config "$a" ;;
    b) write_config "$b" ;;
    broken) write_config "$b"; echo 'balance = "fastest"' >>"$config" ;;
  esac
  kill -HUP "$pid"
  sleep 0.35
done
wait "$slow" "$load"
echo "--- rsp's log, about the reloads:"
sed -E "s/^[0-9-]+ [0-9:]+ //; s|$DEMO_TMP/||g" "$DEMO_TMP/rsp.log" | grep -E 'reloaded|refused|setting'
echo "--- the clients:"
cat "$DEMO_TMP/slow.log" "$DEMO_TMP/load.log"
echo "--- the process:"
now=$(listening_inode "$pid" "$port")
echo "still pid $pid: $(demo_alive "$pid" && echo yes || echo no);" \
  "the same listening socket (inode $inode): $([ "$now" = "$inode" ] && echo yes || echo "no, $now")"

echo "--- and a reload that moves listen to another port:"
new=$(demo_port)
write_config "$a" "$new"
kill -HUP "$pid"
demo_wait_port "$new"
sleep 0.2
"$DEMO_PYTHON" demo/get.py "$new" / "GET / on the new port"
"$DEMO_PYTHON" demo/get.py "$port" / "GET / on the old port"
sed -E "s/^[0-9-]+ [0-9:]+ //; s|$DEMO_TMP/||g" "$DEMO_TMP/rsp.log" | tail -n 3
