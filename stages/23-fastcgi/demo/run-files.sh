#!/usr/bin/env bash
# Files from disk: rsp serving a small site made here (a page, a stylesheet
# with a Brotli copy made in advance, a directory, a 20 MiB file) from
# `root`, with compress = true, a secret file beside the root. Shows a page
# and its validators, the 301 of a directory without its slash, a 304 for
# If-None-Match, a Range answered 206 and one answered 416, traversal
# attempts answered 404 or 400 without the secret, the .br sibling chosen
# for a client that accepts Brotli, and the 20 MiB file byte for byte with
# rsp's peak memory barely moving (sendfile).
# From stages/21-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
for tool in curl brotli sha256sum; do
  command -v "$tool" >/dev/null || demo_fail "this demo needs $tool (apt-get install curl brotli coreutils)"
done
w=$DEMO_TMP

# The site, with every file dated 2026-01-01 00:00 UTC so that the
# validators (Last-Modified, the ETag of mtime and size) are the same on
# every run.
mkdir -p "$w/site/css" "$w/site/docs"
echo '<h1>Hello from the disk</h1>' >"$w/site/index.html"
echo '<p>The docs</p>' >"$w/site/docs/index.html"
for i in $(seq 1 200); do echo ".c$i { color: #$((100 + i)); margin: 0 auto; }"; done >"$w/site/css/site.css"
brotli -q 11 -k "$w/site/css/site.css"
demo_file big.bin 20
echo 'TOP SECRET' >"$w/secret.txt"
echo 'DB_PASSWORD=TOP SECRET' >"$w/site/.env"
ln -s .. "$w/site/up"
find "$w/site" -exec touch -h -d @1767225600 {} +

http=$(demo_port) status=$(demo_port)
cat >"$w/rsp.lua" <<LUA
listen = "127.0.0.1:$http"
status_listen = "127.0.0.1:$status"
root = "$w/site"
compress = true
LUA
demo_rsp rsp ./rsp "$w/rsp.lua"
rsp_pid=${demo_pids[-1]}
base=http://127.0.0.1:$http

# get [CURL ARGS...] PATH: the status line and the fields that matter here.
get() {
  demo_run curl -sS --path-as-is -D "$w/head" -o "$w/body" "${@:1:$#-1}" "$base${!#}"
  tr -d '\r' <"$w/head" | grep -E '^(HTTP/|Content-(Type|Length|Range|Encoding)|ETag|Last-Modified|Location|Vary|Accept-Ranges)'
}

echo "== a page"
get /
etag=$(tr -d '\r' <"$w/head" | sed -n 's/^ETag: //p')
echo "== a directory without its slash"
get /docs
echo "== the page again, with the ETag it had (If-None-Match)"
get -H "If-None-Match: $etag" /
echo "== a part of the 20 MiB file (Range), then a part past its end"
get -H 'Range: bytes=1000-1999' /big.bin
get -H 'Range: bytes=30000000-' /big.bin
echo "== ways out of the root (secret.txt is beside it)"
for path in /../secret.txt /%2e%2e/secret.txt /%252e%252e/secret.txt /css/..%2f..%2fsecret.txt \
            /up/secret.txt /.env; do
  code=$(demo_run curl -sS --path-as-is -o "$w/body" -w '%{http_code}' "$base$path")
  grep -q 'TOP SECRET' "$w/body" && shown=yes || shown=no
  printf '%-26s %s, secret shown: %s\n' "$path" "$code" "$shown"
done
echo "== the stylesheet, for a client that accepts Brotli"
get -H 'Accept-Encoding: gzip, br' /css/site.css | grep -v '^Content-Length'
length=$(tr -d '\r' <"$w/head" | sed -n 's/^Content-Length: //p')
[ "$length" = "$(wc -c <"$w/site/css/site.css.br")" ] && echo "Content-Length: css/site.css.br's size" ||
  echo "Content-Length: $length, NOT css/site.css.br's size"
brotli -dc "$w/body" | cmp -s - "$w/site/css/site.css" && echo "decoded: the same as css/site.css" ||
  echo "decoded: DIFFERENT from css/site.css"
echo "== the 20 MiB file"
hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$rsp_pid/status"; }
before=$(hwm)
demo_run curl -sS -o "$w/big.copy" "$base/big.bin" || demo_fail "the download failed"
after=$(hwm)
[ "$(sha256sum <"$w/big.copy")" = "$(sha256sum <"$w/site/big.bin")" ] && echo "sha256: equal" ||
  echo "sha256: DIFFERENT"
if [ $((after - before)) -lt 4096 ]; then
  echo "rsp's peak memory (VmHWM) during the download: bounded (grew by less than 4 MiB)"
else
  echo "rsp's peak memory (VmHWM) during the download: grew by $(((after - before) / 1024)) MiB"
fi
