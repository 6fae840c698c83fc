# demo/common.sh -- sourced by this stage's demos after tools/demo-lib.sh:
# three named backends (demo/backend.py) and rsp in front of them.
#   start_backend NAME PORT    starts backend.py NAME PORT (stopped at the end)
#   start_rsp BALANCE DOWN_TIME PORT...   writes a config and starts rsp on $proxy
#   get [PATH]                 one request through rsp: prints "STATUS BODY", or
#                              "000 (no answer)" when the connection ends without one
proxy=$(demo_port)
declare -A backend_pid

start_backend() {
  demo_start "backend-$1" "$DEMO_PYTHON" demo/backend.py "$1" "$2"
  backend_pid[$1]=${demo_pids[-1]}
  demo_wait_port "$2"
}

stop_backend() {
  kill "${backend_pid[$1]}" && wait "${backend_pid[$1]}" 2>/dev/null
}

start_rsp() {
  local balance=$1 down_time=$2 list p
  shift 2
  list=$(printf '"127.0.0.1:%s", ' "$@")
  printf 'listen = %s\nbackends = { %s }\nbalance = "%s"\ndown_time = %s\n' \
    "$proxy" "${list%, }" "$balance" "$down_time" >"$DEMO_TMP/rsp.lua"
  echo "\$ cat rsp.lua"
  cat "$DEMO_TMP/rsp.lua"
  demo_rsp rsp ./rsp "$DEMO_TMP/rsp.lua"
}

get() {
  local code
  sleep 0.2      # let rsp finish closing the previous pair: least_conn counts it
  : >"$DEMO_TMP/body"
  code=$(curl -s --max-time 10 -w '%{http_code}' -o "$DEMO_TMP/body" "http://127.0.0.1:$proxy/${1:-}")
  if [ -s "$DEMO_TMP/body" ]; then
    printf '%s ' "$code"
    cat "$DEMO_TMP/body"
  else
    echo "$code (no answer)"
  fi
}

# What rsp has printed so far (its log is on stderr, "Started." on stdout).
show_log() {
  echo "rsp's log:"
  sed 's/^/  /' "$DEMO_TMP/rsp.log"
}
