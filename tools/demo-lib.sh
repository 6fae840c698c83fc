# tools/demo-lib.sh -- what every chapter demo (stages/NN-name/demo/run-*.sh)
# shares. A demo sources it first thing:
#
#   . "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
#
# and is then in its stage directory, with ./rsp built (or it stops with a
# message saying how to build it). Helpers:
#
#   demo_port                  prints a free TCP port on 127.0.0.1, below the ephemeral range
#   demo_start NAME CMD...     starts CMD in the background, output to
#                              $DEMO_TMP/NAME.log; stopped when the demo ends
#   demo_wait_port PORT        waits (10 s at most) until something listens on PORT
#   demo_wait_line FILE REGEX  waits (10 s at most) until FILE has a line matching REGEX
#   demo_rsp NAME CMD...       demo_start NAME CMD... (./rsp ARGS, or ./rsp under
#                              strace), then waits for rsp's "Started." line
#   demo_run CMD...            runs a client in the foreground, bounded by
#                              DEMO_STEP_TIMEOUT seconds (default 30)
#   demo_site                  makes $DEMO_TMP/site with index.html in it
#   demo_file NAME MIB         adds a file of MIB MiB to the site: random-looking
#                              bytes, the same on every run (seeded by NAME)
#   demo_static_backend PORT   serves $DEMO_TMP/site on 127.0.0.1:PORT
#                              (tools/demo-http-server; fixed Server header)
#   demo_alive PID             true while process PID runs
#   demo_fail MESSAGE          prints "demo failed: MESSAGE" and exits 1
#
# Everything a demo starts is stopped when it exits, however it exits
# (normally, on an error, on Ctrl-C, or when DEMO_TIMEOUT seconds, default
# 60, have passed), and its temporary directory $DEMO_TMP is removed. Only
# loopback addresses are used.

set -uo pipefail

DEMO_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEMO_STAGE=$(cd "$(dirname "$0")/.." && pwd)
DEMO_PYTHON=${DEMO_PYTHON:-/usr/bin/python3}
[ -x "$DEMO_PYTHON" ] || DEMO_PYTHON=python3
cd "$DEMO_STAGE" || exit 1
if [ ! -x ./rsp ]; then
  echo "demo: ./rsp is not built: run 'make -C ${DEMO_STAGE#"$(cd "$DEMO_TOOLS/.." && pwd)/"}' first" >&2
  exit 1
fi

DEMO_TMP=$(mktemp -d "${TMPDIR:-/tmp}/rsp-demo.XXXXXX")
demo_pids=()

# Stops what the demo started: the processes themselves and their children
# (a tracer's tracee, a subshell's command), by pid.
demo_cleanup() {
  local pid child
  trap - EXIT INT TERM
  rm -f "$DEMO_TMP/.running"     # the watchdog must not fire any more
  for pid in "${demo_pids[@]}"; do
    for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do kill "$child" 2>/dev/null; done
    kill "$pid" 2>/dev/null
  done
  for pid in "${demo_pids[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$DEMO_TMP"
}
trap demo_cleanup EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT
trap 'echo "demo: stopped (time limit: ${DEMO_TIMEOUT:-60} s)" >&2; exit 124' TERM

# The time limit: a watchdog that stops the whole demo (via the TERM trap),
# unless the demo has ended (and removed .running) by then.
touch "$DEMO_TMP/.running"
( sleep "${DEMO_TIMEOUT:-60}"; [ -e "$DEMO_TMP/.running" ] && kill -TERM $$ 2>/dev/null ) >/dev/null 2>&1 &
demo_pids+=($!)

demo_fail() {
  echo "demo failed: $*" >&2
  exit 1
}

# The port is free now, and chosen below the kernel's ephemeral range
# (/proc/sys/net/ipv4/ip_local_port_range): what runs beside a demo (a
# test suite) binds port 0 and connects from ephemeral ports, which never
# fall there, so the port stays the demo's until it uses it, even one it
# keeps free on purpose (a backend that is down).
demo_port() {
  "$DEMO_PYTHON" -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for port in random.sample(range(10000, low), min(200, low - 10000)) if low > 10200 else []:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    break
else:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

demo_start() {
  local name=$1
  shift
  "$@" >"$DEMO_TMP/$name.log" 2>&1 &
  demo_pids+=($!)
}

# True when a socket listens on PORT (read from /proc/net/tcp*, so that
# checking does not open a connection the proxy would have to serve).
demo_listening() {
  local hex
  hex=$(printf '%04X' "$1")
  grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

demo_wait_port() {
  local i
  for ((i = 0; i < 100; i++)); do
    demo_listening "$1" && return 0
    sleep 0.1
  done
  demo_fail "nothing listens on port $1 after 10 s"
}

# demo_wait_line FILE REGEX: waits (10 s at most) until FILE has a line
# matching REGEX; otherwise shows FILE and fails.
demo_wait_line() {
  local i
  for ((i = 0; i < 100; i++)); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$1" >&2
  demo_fail "no '$2' in $(basename "$1")"
}

demo_rsp() {
  local name=$1 i
  shift
  demo_start "$name" "$@"
  for ((i = 0; i < 100; i++)); do
    grep -qE '^Started\.|^[0-9-]+ [0-9:]+ rsp: Started\.' "$DEMO_TMP/$name.log" 2>/dev/null && return 0
    demo_alive "${demo_pids[-1]}" || break
    sleep 0.1
  done
  cat "$DEMO_TMP/$name.log" >&2
  demo_fail "rsp did not start"
}

demo_run() {
  local pid status
  # In the background and waited for, so that the time limit can interrupt
  # the wait; bounded on its own too.
  timeout -k 2 "${DEMO_STEP_TIMEOUT:-30}" "$@" &
  pid=$!
  demo_pids+=("$pid")
  wait "$pid"
  status=$?
  [ $status -eq 124 ] && echo "demo: '$*' took longer than ${DEMO_STEP_TIMEOUT:-30} s" >&2
  return $status
}

demo_alive() {
  kill -0 "$1" 2>/dev/null
}

demo_site() {
  mkdir -p "$DEMO_TMP/site"
  echo '<h1>Hello from the backend</h1>' >"$DEMO_TMP/site/index.html"
}

demo_file() {
  "$DEMO_PYTHON" -c 'import random, sys; sys.stdout.buffer.write(random.Random(sys.argv[1]).randbytes(int(sys.argv[2]) << 20))' \
    "$1" "$2" >"$DEMO_TMP/site/$1"
}

demo_static_backend() {
  demo_start backend "$DEMO_PYTHON" "$DEMO_TOOLS/demo-http-server" "$1" "$DEMO_TMP/site"
  demo_wait_port "$1"
}
