#!/usr/bin/env bash
# The black box: chapter 11's rsp (../11-logs-service/rsp, built first)
# under load, and what an operator can learn about it while it runs.
# rsp serves www.example.com from backends a and b with an access log;
# demo/traffic.py sends 6 seconds of requests, backend b is stopped after
# 2 seconds, and one request that backend a takes 5 seconds over is under
# way. Three seconds in, we ask: rsp itself (GET /status goes to a
# backend, like any path), the access log (finished requests only, written
# a second late), the kernel (ss: connections, not what they wait for) and
# rsp's stderr. At the end, the access log tallied with awk.
# From stages/12-*/demo.
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
old=../11-logs-service
[ -x "$old/rsp" ] || demo_fail "chapter 11's rsp is not built: make -C $old first"
a=$(demo_port) b=$(demo_port) port=$(demo_port)
demo_start backend-a "$DEMO_PYTHON" "$old/demo/backend.py" a "$a"
demo_start backend-b "$DEMO_PYTHON" "$old/demo/backend.py" b "$b"
backend_b=${demo_pids[-1]}
demo_wait_port "$a"
demo_wait_port "$b"
log=$DEMO_TMP/access.log
cat >"$DEMO_TMP/rsp.lua" <<LUA
listen = "127.0.0.1:$port"
access_log = "$log"
sites = { ["www.example.com"] = { backends = { "127.0.0.1:$a", "127.0.0.1:$b" } },
          ["slow.example.com"] = { backends = { "127.0.0.1:$a" } } }
LUA
demo_rsp rsp "$old/rsp" "$DEMO_TMP/rsp.lua"
lines() { [ -e "$log" ] && wc -l <"$log" || echo 0; }

echo "== chapter 11's rsp: 6 s of traffic; backend b stops after 2 s; one request takes 5 s"
demo_start traffic "$DEMO_PYTHON" demo/traffic.py "$port" www.example.com 20 20 20 20 20 20
traffic=${demo_pids[-1]}
# The slow request has a site of its own, served by a alone: through
# www.example.com, round robin would send it to b now and then, which
# stops under it.
( sleep 0.5; "$DEMO_PYTHON" demo/ask.py "$port" slow.example.com "/?delay=5" ) >"$DEMO_TMP/slow.log" 2>&1 &
slow=$!
demo_pids+=("$slow")
( sleep 2; kill "$backend_b" ) &
demo_pids+=($!)
sleep 3
echo "== 3 s in: what is it doing?"
curl -s -o /dev/null -w 'GET /status through rsp: %{http_code} from backend %header{x-backend}\n' \
  -H 'Host: www.example.com' "http://127.0.0.1:$port/status"
n=$(lines)
echo "the access log: $n lines so far; the slow request is not among them: $(grep -c 'delay=5' "$log")"
echo "ss: $(ss -Htn state established "( sport = :$port )" | wc -l) client connections open to rsp's port"
echo "rsp's stderr:"
sed -E 's/^[0-9-]+ [0-9:]+ //' "$DEMO_TMP/rsp.log" | sed -n '/^Started/,$p' | grep -v '^Started'
wait "$traffic" "$slow"
sleep 1.2
echo "== afterwards: the access log, tallied by status"
echo "$(lines) lines; $(awk '{ n[$9]++ } END { for (s in n) printf "%s %d\n", s, n[s] }' "$log" | sort |
  paste -sd ' ' | sed 's/ \([0-9]*\) / \1, /g')"
cat "$DEMO_TMP/slow.log"
