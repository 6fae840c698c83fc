#!/usr/bin/env bash
# Compression on the way out: rsp with compress = true in front of
# tools/demo-http-server serving a 100 KiB HTML page (made here, the same on
# every run). Fetches it with each Accept-Encoding, shows what rsp sent
# (Content-Encoding, size, ratio) and that each body decodes, with the
# command-line tool of its coding, to the backend's page byte for byte;
# then status.json's "compression" figures.
# From stages/21-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
for tool in curl brotli zstd gzip; do
  command -v "$tool" >/dev/null || demo_fail "this demo needs $tool (apt-get install curl brotli zstd gzip)"
done
w=$DEMO_TMP

# A page of 102,400 bytes: headings and paragraphs of words drawn, with a
# fixed seed, from a small vocabulary, as prose is.
demo_site
"$DEMO_PYTHON" - "$w/site/page.html" <<'PY'
import random, sys
rng = random.Random(21)
words = ("the proxy file server client request response header body stream window cache "
         "page site root path kernel socket buffer memory encoder compress gzip brotli zstd "
         "a an of to in and or is are was were with from for on at by it this that").split()
weights = [1 / (i + 1) for i in range(len(words))]
out = ['<!DOCTYPE html>\n<html><head><title>A page</title></head>\n<body>\n']
size = sum(map(len, out))
n = 0
while size < 102400:
    n += 1
    text = " ".join(rng.choices(words, weights, k=rng.randint(40, 120)))
    part = f'<h2 id="s{n}">Section {n}</h2>\n<p class="prose">{text}.</p>\n'
    out.append(part)
    size += len(part)
page = "".join(out)
page = page[:102400 - len("</body></html>\n")] + "</body></html>\n"
open(sys.argv[1], "w").write(page)
PY
backend=$(demo_port) http=$(demo_port) status=$(demo_port)
demo_static_backend "$backend"
cat >"$w/rsp.lua" <<LUA
listen = "127.0.0.1:$http"
status_listen = "127.0.0.1:$status"
backends = { "127.0.0.1:$backend" }
compress = true
LUA
demo_rsp rsp ./rsp "$w/rsp.lua"
original=$(wc -c <"$w/site/page.html")

echo "== the backend's page: $original bytes"
for accept in br zstd gzip "" "gzip;q=0.5, zstd;q=0.8" "br;q=0, *"; do
  demo_run curl -sS -H "Accept-Encoding: $accept" -D "$w/head" -o "$w/body" "http://127.0.0.1:$http/page.html" ||
    demo_fail "curl failed"
  coding=$(tr -d '\r' <"$w/head" | sed -n 's/^Content-Encoding: //p')
  size=$(wc -c <"$w/body")
  case $coding in
    br) decode=(brotli -dc) ;;
    zstd) decode=(zstd -dcq) ;;
    gzip) decode=(gzip -dc) ;;
    *) decode=(cat) ;;
  esac
  "${decode[@]}" <"$w/body" | cmp -s - "$w/site/page.html" && same=yes || same=NO
  printf '%-24s -> %-5s %6d bytes, ratio %s, decodes to the page: %s\n' "${accept:-(none)}" "${coding:-none}" \
    "$size" "$(awk -v a="$original" -v b="$size" 'BEGIN { printf "%.1f", a / b }')" "$same"
done

echo "== status.json"
curl -sS "http://127.0.0.1:$status/status.json" | "$DEMO_PYTHON" -c '
import json, sys
c = json.load(sys.stdin)["compression"]
print("responses:", json.dumps(c["responses"]))
print("bytes_in:", c["bytes_in"], " bytes_out:", c["bytes_out"], "(ratio %.1f)" % (c["bytes_in"] / c["bytes_out"]))
print("encoders open now:", c["encoders"], " their memory:", c["memory_bytes"], "bytes")'
