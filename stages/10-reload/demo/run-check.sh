#!/usr/bin/env bash
# rsp's command line: -v, and -t on a config that is fine (also while an
# rsp with that very config runs: -t binds nothing), then on three that
# are not: a typo in a setting's value, a Lua syntax error, and a file
# that is not there. Last, an option rsp does not know. Each command is printed as it would be typed
# in the directory holding the configs, with its exit status after it.
# From stages/10-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
rsp=$PWD/rsp
port=$(demo_port)

cd "$DEMO_TMP" || exit 1
cat >site.lua <<EOF
listen = "127.0.0.1:$port"
backends = { "127.0.0.1:8080" }
shutdown_timeout = 5
EOF
sed 's/^backends.*/&\nbalance = "round-robin"/' site.lua >typo.lua
sed 's/^backends = {/backends = {{/' site.lua >syntax.lua

show() {     # show COMMAND...: prints it, runs it, prints its status
  echo "\$ rsp ${*:2}"
  "$@" 2>&1
  echo "(exit status $?)"
}
show "$rsp" -v
show "$rsp" -t site.lua
echo "-- the same while rsp runs with site.lua, listening on its port:"
demo_rsp running "$rsp" site.lua
show "$rsp" -t site.lua
show "$rsp" -t typo.lua
show "$rsp" -t syntax.lua
show "$rsp" -t nosuch.lua
show "$rsp" -x
