#!/usr/bin/env bash
# Answers written by route (demo/answers.lua): a header given as a list,
# and a redirect built from the query, which a client tries to inject a
# header into.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
. demo/common.sh
start_rsp demo/answers.lua
get() {
  show_cmd curl "$@"
  demo_run curl "$@" | tr -d '\r'
}
get -si "http://127.0.0.1:$port/login"
get -s -o /dev/null -w '%{http_code} %{redirect_url}\n' "http://127.0.0.1:$port/go?to=/welcome"
get -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/go?to=/welcome%0d%0aSet-Cookie:%20session=attacker"
echo "rsp's log:"
rsp_log answers
