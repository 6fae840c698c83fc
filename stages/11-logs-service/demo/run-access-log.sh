#!/usr/bin/env bash
# The access log. Six requests of different kinds (demo/requests.py), and
# the log file looked at at once and then a second later (lines are
# buffered); the lines. Then logrotate's way of rotating: the file is
# renamed, a request comes, rsp gets SIGUSR1, another request comes; how
# many lines each file has. goaccess reads both files. Last, a reload to
# access_log_format = "timed", and the line of a request the backend took
# 0.2 s over.
# From stages/11-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
backend=$(demo_port) port=$(demo_port)
demo_start backend "$DEMO_PYTHON" demo/backend.py a "$backend"
demo_wait_port "$backend"
config=$DEMO_TMP/rsp.lua
printf 'listen = "127.0.0.1:%s"\nbackends = { "127.0.0.1:%s" }\naccess_log = "%s"\n' \
  "$port" "$backend" "$DEMO_TMP/access.log" >"$config"
demo_rsp rsp ./rsp "$config"
pid=${demo_pids[-1]}
stage=$PWD
cd "$DEMO_TMP" || exit 1
lines() { [ -e "$1" ] && wc -l <"$1" || echo "no file"; }

demo_run "$DEMO_PYTHON" "$stage/demo/requests.py" "$port"
echo "lines in access.log at once: $(lines access.log)"
sleep 1.2
echo "a second later: $(lines access.log)"
cat access.log

echo "--- mv access.log access.log.1, a request, SIGUSR1, a request"
mv access.log access.log.1
"$DEMO_PYTHON" "$stage/demo/requests.py" "$port" /after-the-rename
kill -USR1 "$pid"
sleep 0.2
"$DEMO_PYTHON" "$stage/demo/requests.py" "$port" /after-sigusr1
sleep 1.2
for f in access.log.1 access.log; do
  n=$(lines $f)
  echo "$f: $n line$([ "$n" = 1 ] || echo s), the last: $(tail -n 1 $f | cut -d '"' -f 2)"
done
sed -E "s/^[0-9-]+ [0-9:]+ //; s|$DEMO_TMP/||g" rsp.log | grep access_log

echo "--- goaccess --log-format=COMBINED access.log.1 access.log"
if command -v goaccess >/dev/null; then
  goaccess access.log.1 access.log --log-format=COMBINED --no-global-config -o report.json \
    </dev/null >goaccess.out 2>&1 || { cat goaccess.out; demo_fail "goaccess failed"; }
  "$DEMO_PYTHON" -c 'import json; g = json.load(open("report.json"))["general"]
print("%d requests, %d valid, %d failed" % (g["total_requests"], g["valid_requests"], g["failed_requests"]))'
else
  echo "goaccess is not installed (apt-get install goaccess)"
fi

echo "--- access_log_format = \"timed\", SIGHUP, a request the backend takes 0.2 s over"
echo 'access_log_format = "timed"' >>"$config"
kill -HUP "$pid"
sleep 0.2
"$DEMO_PYTHON" "$stage/demo/requests.py" "$port" "/?delay=0.2"
sleep 1.2
tail -n 1 access.log
