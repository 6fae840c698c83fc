#!/usr/bin/env bash
# Installs what rsp needs on Debian/Ubuntu. Idempotent: running it twice is
# harmless. Works as root or through sudo.
#
#   ./setup-env.sh            the developer's set: build, test, benchmark (nginx,
#                             haproxy, chromium, certbot, pebble...). The daemons
#                             among them are disabled and stopped: after a reboot
#                             nothing of theirs listens.
#   ./setup-env.sh --build    only what building rsp and its Debian package needs
#                             (compiler, make, dpkg-dev, the -dev libraries):
#                             for `make deb` on a build machine or a server.
#   ./setup-env.sh --list     (with or without --build) print the packages and exit
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

mode=all
list=0
for arg in "$@"; do
  case "$arg" in
    --build) mode=build ;;
    --list) list=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup-env.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
  esac
done

# What building rsp (make, make deb) needs, and nothing else.
BUILD_PACKAGES=(
  build-essential        # gcc, make, and dpkg-dev: make deb's dpkg-shlibdeps, dpkg-buildflags
  pkg-config             # finds LuaJIT's flags
  libluajit-5.1-dev      # the config language
  libssl-dev             # OpenSSL 3: rsp's HTTPS (chapter 12)
  libjansson-dev         # JSON for the ACME client (chapter 19)
  libnghttp2-dev         # HTTP/2 framing for clients (chapter 20)
  zlib1g-dev             # gzip for compressed responses (chapter 21)
  libbrotli-dev          # brotli for compressed responses (chapter 21)
  libzstd-dev            # zstd for compressed responses (chapter 21)
  libcrypt-dev           # crypt(3) for basic_auth's password hashes (chapter 22)
)

# The daemons the developer's set brings (nginx-common's nginx.service,
# haproxy's haproxy.service, caddy's caddy.service): tests and benchmarks start their own copies
# with their own configs, so the system services are disabled and stopped.
# (The other units the set's packages bring are timers that listen on
# nothing: certbot.timer, logrotate.timer, dpkg-db-backup.timer.)
DAEMONS=(nginx haproxy caddy php8.2-fpm)

PACKAGES=(
  build-essential        # gcc, make
  pkg-config             # finds LuaJIT's flags
  libluajit-5.1-dev      # the config language
  luajit                 # the interpreter, handy for trying configs
  python3                # functional tests and the demo backend
  python3-pytest         # functional tests (PyPI is not reachable: Debian's pytest)
  python3-pytest-timeout # no test can hang the suite
  python3-pytest-xdist   # run_integration_tests spreads each suite over worker processes
  apache2-utils          # ab, for load in tests and benchmarks
  curl                   # quick manual checks, and the chapters' demos
  strace                 # the chapters' demos trace rsp's system calls
  nginx                  # a real web server the tests put rsp in front of
  procps                 # ps, pgrep
  patch                  # tools/stage-check applies a chapter's CHANGES-1-*.diff part
  clang                  # make asan and the fuzz harnesses (fuzz/)
  libclang-rt-dev        # clang's sanitizer and libFuzzer runtimes (libclang_rt.fuzzer)
  valgrind               # leak checks by hand (README, developer section)
  wrk                    # keep-alive load for bench/run
  gnuplot-nox            # bench/run's plot (PNG)
  haproxy                # bench/keepalive compares rsp with HAProxy too
  linux-perf             # bench/syscalls counts system calls, bench/flamegraph profiles
  goaccess               # the access log tests check that goaccess reads rsp's log
  logrotate              # the install tests check the logrotate snippet (dist/)
  chromium               # a headless browser renders the status page (test_status.py)
  chromium-driver        # chromedriver: selenium drives that browser
  python3-selenium       # the status page test's WebDriver client (PyPI is not reachable)
  libssl-dev             # OpenSSL 3: rsp's HTTPS (chapter 12)
  libjansson-dev         # JSON for the ACME client (chapter 19)
  libnghttp2-dev         # HTTP/2 framing for clients (chapter 20)
  zlib1g-dev             # gzip for compressed responses (chapter 21)
  libbrotli-dev          # brotli for compressed responses (chapter 21)
  libzstd-dev            # zstd for compressed responses (chapter 21)
  libcrypt-dev           # crypt(3) for basic_auth's password hashes (chapter 22)
  openssl                # the command line: certificates for the chapters' demos
  python3-trustme        # a throwaway CA and certificates for the TLS tests
  python3-h2             # HTTP/2 frame by frame (with hpack and hyperframe) for test_http2.py
  nghttp2-client         # h2load and nghttp: real HTTP/2 clients in test_http2.py and the HTTP/2 bench
  pebble                 # an ACME test server (and pebble-challtestsrv, its mock DNS)
  certbot                # the ACME client the end-to-end test drives through rsp
  python3-gunicorn       # an application server with sync workers behind rsp (test_buffering.py)
  python3-prometheus-client # Prometheus's own parser reads /metrics' histograms (test_latency.py)
  media-types            # /etc/mime.types: Content-Type of the files rsp serves (chapter 21)
  brotli                 # the command line: test_files.py decompresses rsp's brotli with it
  zstd                   # the command line: test_files.py decompresses rsp's zstd with it
  python3-brotli         # brotli in Python, for the compression tests' streaming reads
  python3-zstandard      # zstd in Python, for the compression tests' streaming reads
  caddy                  # bench/files compares rsp's file serving and compression with Caddy's
  php8.2-fpm             # a FastCGI responder the tests put rsp in front of (test_fastcgi.py, chapter 23)
  php8.2-cli             # php-fpm's PHP, and the command line for trying scripts
  dokuwiki               # a real PHP application behind rsp (test_dokuwiki.py); php8.2-fpm satisfies its php8.2
)

if [ "$mode" = build ]; then
  PACKAGES=("${BUILD_PACKAGES[@]}")
fi
if [ "$list" = 1 ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup-env.sh: run as root or install sudo" >&2
  exit 1
fi

# The unit files enabled now: what the install enables on top is reported.
enabled_units() {
  if command -v systemctl >/dev/null 2>&1; then
    { systemctl list-unit-files --state=enabled --no-legend 2>/dev/null || true; } | awk '{print $1}' | sort
  fi
}

# Disables (for the next boot) and stops each of DAEMONS that is installed:
# with systemctl when there is one (it also handles the SysV links), else
# with update-rc.d; stopped by systemd when it runs, else by the init script
# (a container without systemd).
quiet_daemons() {
  local d
  for d in "${DAEMONS[@]}"; do
    [ -e "/lib/systemd/system/$d.service" ] || [ -e "/etc/init.d/$d" ] || continue
    if command -v systemctl >/dev/null 2>&1; then
      "${SUDO[@]}" systemctl disable --quiet "$d.service" 2>/dev/null ||
        { echo "setup-env.sh: systemctl disable $d failed" >&2; exit 1; }
    elif command -v update-rc.d >/dev/null 2>&1; then
      "${SUDO[@]}" update-rc.d "$d" disable >/dev/null ||
        { echo "setup-env.sh: update-rc.d $d disable failed" >&2; exit 1; }
    fi
    if [ -d /run/systemd/system ]; then
      "${SUDO[@]}" systemctl stop "$d.service" ||
        { echo "setup-env.sh: systemctl stop $d failed" >&2; exit 1; }
    elif [ -x "/etc/init.d/$d" ]; then
      "${SUDO[@]}" "/etc/init.d/$d" stop >/dev/null 2>&1 || true
    fi
  done
  echo "setup-env.sh: ${DAEMONS[*]} disabled and stopped (the tests run their own; to serve with one:" \
       "sudo systemctl enable --now NAME)"
}

before=$(enabled_units)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-env.sh: every package is already installed"
else
  echo "setup-env.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q || { echo "setup-env.sh: apt-get update failed" >&2; exit 1; }
  # Don't let the packages start the services they bring while they
  # install (invoke-rc.d and deb-systemd-invoke ask policy-rc.d; 101:
  # action forbidden); quiet_daemons then disables them for the next boot.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${SUDO[@]}" chmod +x /usr/sbin/policy-rc.d
    remove_policy=1
  fi
  status=0
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" || status=$?
  if [ "${remove_policy:-0}" = 1 ]; then "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d; fi
  if [ "$status" -ne 0 ]; then
    echo "setup-env.sh: apt-get install failed (status $status)" >&2
    exit 1
  fi
fi

# Check that what we need really works, so a broken install fails here and
# not halfway through the tests (or the build).
pkg-config --exists luajit || { echo "setup-env.sh: pkg-config cannot find luajit" >&2; exit 1; }
pkg-config --exists openssl || { echo "setup-env.sh: pkg-config cannot find openssl (libssl-dev)" >&2; exit 1; }
command -v dpkg-shlibdeps >/dev/null || { echo "setup-env.sh: dpkg-shlibdeps is missing (dpkg-dev)" >&2; exit 1; }
if [ "$mode" = build ]; then
  echo "setup-env.sh: ready to build (make, make deb)"
  exit 0
fi

quiet_daemons
new_units=$(comm -13 <(echo "$before") <(enabled_units) | grep -v -E "^($(IFS='|'; echo "${DAEMONS[*]}"))\.service$" || true)
if [ -n "$new_units" ]; then
  echo "setup-env.sh: the packages also enabled (left as they are):" $new_units
fi
/usr/bin/python3 -c 'import pytest' || { echo "setup-env.sh: python3-pytest is not importable" >&2; exit 1; }
command -v ab >/dev/null || { echo "setup-env.sh: ab is missing" >&2; exit 1; }
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null || { echo "setup-env.sh: nginx is missing" >&2; exit 1; }
command -v wrk >/dev/null || { echo "setup-env.sh: wrk is missing" >&2; exit 1; }
command -v strace >/dev/null || { echo "setup-env.sh: strace is missing" >&2; exit 1; }
command -v patch >/dev/null || { echo "setup-env.sh: patch is missing" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "setup-env.sh: gnuplot is missing" >&2; exit 1; }
[ -x /usr/sbin/haproxy ] || command -v haproxy >/dev/null || { echo "setup-env.sh: haproxy is missing" >&2; exit 1; }
command -v clang >/dev/null || { echo "setup-env.sh: clang is missing" >&2; exit 1; }
command -v goaccess >/dev/null || { echo "setup-env.sh: goaccess is missing" >&2; exit 1; }
[ -x /usr/sbin/logrotate ] || command -v logrotate >/dev/null || { echo "setup-env.sh: logrotate is missing" >&2; exit 1; }
command -v chromium >/dev/null || { echo "setup-env.sh: chromium is missing" >&2; exit 1; }
command -v chromedriver >/dev/null || { echo "setup-env.sh: chromedriver is missing" >&2; exit 1; }
/usr/bin/python3 -c 'import selenium' || { echo "setup-env.sh: python3-selenium is not importable" >&2; exit 1; }
/usr/bin/python3 -c 'import trustme' || { echo "setup-env.sh: python3-trustme is not importable" >&2; exit 1; }
/usr/bin/python3 -c 'import gunicorn' || { echo "setup-env.sh: python3-gunicorn is not importable" >&2; exit 1; }
command -v pebble >/dev/null || { echo "setup-env.sh: pebble is missing" >&2; exit 1; }
command -v pebble-challtestsrv >/dev/null || { echo "setup-env.sh: pebble-challtestsrv is missing" >&2; exit 1; }
command -v certbot >/dev/null || { echo "setup-env.sh: certbot is missing" >&2; exit 1; }
# The fuzz harnesses need libFuzzer (-fsanitize=fuzzer) from libclang-rt-dev.
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
  clang -x c -fsanitize=fuzzer,address,undefined -o /dev/null - 2>/dev/null ||
  { echo "setup-env.sh: clang cannot link libFuzzer (-fsanitize=fuzzer): is libclang-rt-dev installed?" >&2; exit 1; }
echo "setup-env.sh: ready"
