#!/usr/bin/env bash
# A PHP site behind rsp: php-fpm8.2 with a pool of its own on a Unix
# socket in the demo's directory, and rsp with root and fastcgi in front
# of it. Shows what a script is told (SCRIPT_FILENAME, SCRIPT_NAME,
# REQUEST_URI, no HTTP_PROXY), a pretty URL going to the front controller,
# a stylesheet served from disk without PHP, a script's Location made a
# 302, the PATH_INFO attack (/uploads/cat.jpg/x.php, with PHP code planted
# in cat.jpg) never running the planted code, and a script's stderr in
# rsp's log.
# From stages/23-*/demo or from src/demo (src holds the newest stage's demos).
lib=$(dirname "$0")/../../../tools/demo-lib.sh
[ -e "$lib" ] || lib=$(dirname "$0")/../../tools/demo-lib.sh
. "$lib" || exit 1
command -v curl >/dev/null || demo_fail "this demo needs curl (apt-get install curl)"
fpm=$(command -v php-fpm8.2 || ls /usr/sbin/php-fpm8.2 2>/dev/null) ||
  demo_fail "this demo needs php-fpm8.2 (apt-get install php8.2-fpm)"
w=$DEMO_TMP

# The site: a front controller, a script, a redirect, a stylesheet, and
# an "image" someone uploaded with PHP code in it.
mkdir -p "$w/site/uploads"
cat >"$w/site/index.php" <<'PHP'
<?php
header("Content-Type: text/plain");
echo "index.php, the front controller, routing ", $_SERVER["REQUEST_URI"], "\n";
PHP
cat >"$w/site/env.php" <<'PHP'
<?php
header("Content-Type: text/plain");
foreach (["SCRIPT_FILENAME", "SCRIPT_NAME", "PATH_INFO", "REQUEST_URI", "QUERY_STRING", "REMOTE_ADDR",
          "HTTP_X_FORWARDED_FOR", "HTTP_PROXY"] as $k)
    echo "$k=", $_SERVER[$k] ?? "(not set)", "\n";
error_log("env.php was asked for " . $_SERVER["REQUEST_URI"]);
PHP
cat >"$w/site/login.php" <<'PHP'
<?php
header("Location: /welcome");
PHP
echo 'body { color: #333; }' >"$w/site/style.css"
printf 'GIF89a<?php echo "PLANTED CODE RAN"; ?>\n' >"$w/site/uploads/cat.jpg"

# php-fpm in the foreground, one pool listening on a Unix socket (run as
# root only if the demo is: -R and user = root allow it).
sock=$w/php-fpm.sock
{
  echo '[global]'
  echo "error_log = $w/php-fpm.log"
  echo 'daemonize = no'
  echo '[demo]'
  [ "$(id -u)" = 0 ] && echo 'user = root'
  echo "listen = $sock"
  echo 'pm = static'
  echo 'pm.max_children = 2'
  echo 'catch_workers_output = yes'
} >"$w/php-fpm.conf"
root_flag=()
[ "$(id -u)" = 0 ] && root_flag=(-R)
demo_start php-fpm "$fpm" -F "${root_flag[@]}" -y "$w/php-fpm.conf" -p "$w"
for ((i = 0; i < 100; i++)); do
  [ -S "$sock" ] && break
  sleep 0.1
done
[ -S "$sock" ] || demo_fail "php-fpm made no socket $sock in 10 s"

http=$(demo_port)
cat >"$w/rsp.lua" <<LUA
listen = "127.0.0.1:$http"
sites = { ["blog.example"] = {
  root = "$w/site",
  fastcgi = { backends = { "unix:$sock" } },
} }
LUA
echo "== rsp.lua"
sed "s|$w|/tmp/demo|g" "$w/rsp.lua"
demo_rsp rsp ./rsp "$w/rsp.lua"
base=http://blog.example:$http

# get [CURL ARGS...] PATH: the status, the fields that matter, the body.
get() {
  echo "-- GET ${!#}"
  demo_run curl -sS --resolve "blog.example:$http:127.0.0.1" --path-as-is -D "$w/head" -o "$w/body" "${@:1:$#-1}" "$base${!#}"
  tr -d '\r' <"$w/head" | grep -iE '^(HTTP/|Content-Type|Location)'
  sed "s|$w|/tmp/demo|g" "$w/body"
}

echo "== a script, and what it is told (a Proxy header sent too)"
get -H 'Proxy: http://evil.example:8080' '/env.php?page=2'
echo "== a pretty URL: no such file, so the front controller runs"
get /blog/2026/hello-world
echo "== a stylesheet: an existing file that is not PHP, served from disk"
get /style.css
echo "== a script's Location"
get /login.php
echo "== the uploaded image, as a file: its bytes, not run"
get /uploads/cat.jpg
echo "== the PATH_INFO attack"
get /uploads/cat.jpg/x.php
demo_run curl -sS --resolve "blog.example:$http:127.0.0.1" -o "$w/body" "$base/uploads/cat.jpg/x.php"
grep -q 'PLANTED CODE RAN' "$w/body" && echo "the planted code RAN" || echo "the planted code never ran"
echo "== rsp's log"
demo_wait_line "$DEMO_TMP/rsp.log" 'stderr'
grep 'stderr' "$DEMO_TMP/rsp.log" | sed -e "s|$w|/tmp/demo|g" -e 's/^[0-9-]* [0-9:]* //'
