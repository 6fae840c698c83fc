# demo/common.sh -- sourced by this stage's demos after tools/demo-lib.sh.
#   start_backends        makes three small sites in $DEMO_TMP (app-a, app-b:
#                         an index.html saying which they are, and admin/;
#                         static: static/site.css) and serves them with
#                         tools/demo-http-server on $app_a, $app_b, $static;
#                         their logs are $DEMO_TMP/{app-a,app-b,static}.log
#   start_rsp FILE [NAME] writes $DEMO_TMP/demo/NAME.lua (NAME: FILE's name)
#                         from FILE, with a free port ($port) for 'listen' and
#                         the backends' ports 8001-8003 replaced by the ones
#                         above, and starts rsp with it from $DEMO_TMP, so that
#                         its messages name demo/NAME.lua, as they would for
#                         ./rsp demo/NAME.lua; its log is $DEMO_TMP/NAME.log
#   rsp_log NAME          that log, without the start-up lines

start_backends() {
  local d
  mkdir -p "$DEMO_TMP/app-a/admin" "$DEMO_TMP/app-b/admin" "$DEMO_TMP/static/static"
  echo "app, backend A" >"$DEMO_TMP/app-a/index.html"
  echo "admin of A" >"$DEMO_TMP/app-a/admin/index.html"
  echo "app, backend B" >"$DEMO_TMP/app-b/index.html"
  echo "admin of B" >"$DEMO_TMP/app-b/admin/index.html"
  echo "body { color: teal }" >"$DEMO_TMP/static/static/site.css"
  app_a=$(demo_port) app_b=$(demo_port) static=$(demo_port)
  demo_start app-a "$DEMO_PYTHON" "$DEMO_TOOLS/demo-http-server" "$app_a" "$DEMO_TMP/app-a"
  demo_start app-b "$DEMO_PYTHON" "$DEMO_TOOLS/demo-http-server" "$app_b" "$DEMO_TMP/app-b"
  demo_start static "$DEMO_PYTHON" "$DEMO_TOOLS/demo-http-server" "$static" "$DEMO_TMP/static"
  for d in "$app_a" "$app_b" "$static"; do demo_wait_port "$d"; done
}

start_rsp() {
  local name=${2:-$(basename "$1" .lua)}
  port=$(demo_port)
  sed -e "s/^listen = [0-9]*/listen = $port/; s/\b8001\b/${app_a:-8001}/; s/\b8002\b/${app_b:-8002}/; s/\b8003\b/${static:-8003}/" \
    "$1" >"$DEMO_TMP/demo/$name.lua"
  demo_rsp "$name" bash -c 'cd "$1" && exec "$2" "demo/$3.lua"' rsp "$DEMO_TMP" "$DEMO_STAGE/rsp" "$name"
}

mkdir -p "$DEMO_TMP/demo"

# rsp's log so far, without the start-up lines.
rsp_log() {
  grep -v '^Started\.\|listening on\|: pool \|: site \|default site\|chooses for every' "$DEMO_TMP/$1.log"
}

# show_cmd WORDS...: prints "$ WORDS", quoting the words that need it, with
# rsp's port written as $port
show_cmd() {
  local out="\$" w
  for w in "$@"; do
    if [[ $w =~ ^[-A-Za-z0-9_./:=@]+$ ]]; then out+=" $w"; else out+=" '$w'"; fi
  done
  echo "${out//127.0.0.1:$port/127.0.0.1:\$port}"
}
