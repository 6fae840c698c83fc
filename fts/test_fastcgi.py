"""PHP sites behind rsp over FastCGI (stage 23, issue 32): a site with
`root` and `fastcgi` runs its scripts on Debian's php-fpm8.2, which each
test starts itself with a pool of its own in tmp_path (on 127.0.0.1 and a
free port). The scripts print what PHP got (every CGI/1.1 parameter,
HTTP_* headers, never HTTP_PROXY), echo uploads byte-exact (1 MiB, and
16 MiB with max_body_size raised; chunked ones too, read whole first),
stream large output, set Status, Location and two cookies, and write to
STDERR (rsp's log). What runs: a static file beside the scripts is served
as a file; a missing script and a pretty URL go to the front controller
with the original REQUEST_URI; /uploads/cat.jpg/x.php never runs the PHP
planted in cat.jpg. php-fpm stopped: 502; restarted: served again, also
under load from six clients (SIGTERM and SIGQUIT), every request answered
whole. rsp stopping closes its idle connections to php-fpm at once (a
kept one holds a php-fpm child a queued request waits for). Config
errors name the setting. Skipped with a clear message without php-fpm8.2."""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from checks import assert_config_error, wait_for_log
from client import Conn, chunked
from netutil import LOOPBACK, free_port, wait_for, wait_until_listening
from pattern import assert_same_bytes, pattern
from proxy import lua_string, run_rsp, stop_process

pytestmark = pytest.mark.stage(23)

PHP_FPM = shutil.which("php-fpm8.2") or ("/usr/sbin/php-fpm8.2" if os.path.exists("/usr/sbin/php-fpm8.2") else None)
HOST = "php.test"
MiB = 1024 * 1024
PARAMS = ["SCRIPT_FILENAME", "SCRIPT_NAME", "PATH_INFO", "DOCUMENT_ROOT", "REQUEST_URI", "QUERY_STRING",
          "REQUEST_METHOD", "CONTENT_TYPE", "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL",
          "REMOTE_ADDR", "REMOTE_PORT", "GATEWAY_INTERFACE", "HTTPS", "APP_ENV", "HTTP_HOST", "HTTP_PROXY",
          "HTTP_X_CUSTOM", "HTTP_COOKIE", "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP", "HTTP_USER_AGENT"]

# The scripts every test's root holds.
ENV_PHP = """<?php
header("Content-Type: text/plain");
echo "script=" . basename(__FILE__) . "\\n";
foreach (%s as $k) echo "$k=" . (array_key_exists($k, $_SERVER) ? $_SERVER[$k] : "<unset>") . "\\n";
echo "body=" . strlen(file_get_contents("php://input")) . "\\n";
""" % ("[" + ", ".join(f'"{p}"' for p in PARAMS) + "]")
ECHO_PHP = """<?php
header("Content-Type: application/octet-stream");
$in = fopen("php://input", "rb");
$out = fopen("php://output", "wb");
stream_copy_to_stream($in, $out);
"""
BIG_PHP = """<?php
header("Content-Type: application/octet-stream");
$block = str_repeat("0123456789abcdef", 4096);
$n = intval($_GET["mib"]) * 16;
for ($i = 0; $i < $n; $i++) echo $block;
"""
COOKIES_PHP = """<?php
header("Status: 404 Not Found");
setcookie("first", "1");
setcookie("second", "2");
echo "not here\\n";
"""
REDIRECT_PHP = """<?php
header("Location: https://example.org/elsewhere");
"""
STDERR_PHP = """<?php
error_log("a note from the script 7f3a");
echo "done\\n";
"""
GATE_PHP = """<?php
// Answers once the file ?file= names exists (the test makes it), or after 10 s.
$end = microtime(true) + 10;
while (!file_exists($_GET["file"]) && microtime(true) < $end) { usleep(10000); clearstatcache(); }
echo file_exists($_GET["file"]) ? "gate opened\\n" : "gate timed out\\n";
"""
SLOW_PHP = """<?php
sleep(5);
echo "late\\n";
"""
PLANTED = b"GIF89a<?php echo 'PLANTED-CODE-RAN'; ?>\n"
CSS = b"body { color: #123456; }\n"


@pytest.fixture
def root(tmp_path):
    www = tmp_path / "www"
    (www / "uploads").mkdir(parents=True)
    for name, text in {"index.php": ENV_PHP, "env.php": ENV_PHP, "echo.php": ECHO_PHP, "big.php": BIG_PHP,
                       "cookies.php": COOKIES_PHP, "redirect.php": REDIRECT_PHP, "stderr.php": STDERR_PHP,
                       "slow.php": SLOW_PHP, "gate.php": GATE_PHP}.items():
        (www / name).write_text(text)
    (www / "style.css").write_bytes(CSS)
    (www / "uploads" / "cat.jpg").write_bytes(PLANTED)
    return www


class PhpFpm:
    """php-fpm8.2 in the foreground with one pool on 127.0.0.1:port, or on
    a Unix socket in tmp_path (unix=True; then .address is "unix:PATH"),
    with `children` workers (pm static: each serves one connection at a
    time, and stays with a kept one until the other side closes it)."""

    def __init__(self, tmp_path, unix=False, children=2):
        self.port = free_port()
        self.socket = str(tmp_path / "php-fpm.sock") if unix else None
        self.address = f"unix:{self.socket}" if unix else f"{LOOPBACK}:{self.port}"
        self.prefix = tmp_path / "fpm"
        self.prefix.mkdir(exist_ok=True)
        self.conf = self.prefix / "php-fpm.conf"
        root_user = "user = root\n" if os.geteuid() == 0 else ""
        self.conf.write_text(
            "[global]\n"
            f"error_log = {self.prefix}/php-fpm.log\n"
            "daemonize = no\n"
            "[app]\n"
            f"{root_user}"
            f"listen = {self.socket or f'{LOOPBACK}:{self.port}'}\n"
            "pm = static\n"
            f"pm.max_children = {children}\n"
            "clear_env = yes\n"
            "catch_workers_output = yes\n"
            "ping.path = /ping\n")
        self.process = None
        self.start()

    def start(self):
        args = [PHP_FPM, "-F", "-y", str(self.conf), "-p", str(self.prefix)]
        if os.geteuid() == 0:
            args.insert(2, "-R")  # a pool run as root must be allowed so
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        if self.socket is None:
            wait_until_listening(self.port, self.process, what="php-fpm8.2")
            return
        deadline = time.monotonic() + 10
        while True:  # php-fpm makes the socket file once it listens on it
            assert self.process.poll() is None, "php-fpm8.2 exited before listening"
            with socket.socket(socket.AF_UNIX) as probe:
                if probe.connect_ex(self.socket) == 0:
                    return
            assert time.monotonic() < deadline, f"php-fpm8.2 did not listen on {self.socket} within 10 s"
            time.sleep(0.02)

    def stop(self, sig=signal.SIGTERM):
        """Stops php-fpm with sig: SIGTERM (its children quit at once) or
        SIGQUIT (graceful: requests under way finish first). Returns
        True if it exited on that within 10 s (otherwise it is killed)."""
        if self.process is None:
            return True
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=10)
            exited = True
        except subprocess.TimeoutExpired:
            exited = False
        stop_process(self.process)  # ends it if it is still there
        self.process = None
        return exited


def running_fpm(tmp_path, unix=False):
    """The body of the fpm fixtures: a PhpFpm for the test (skipped without
    php-fpm8.2), stopped after it."""
    if PHP_FPM is None:
        pytest.skip("php-fpm8.2 is not installed (Debian's php8.2-fpm; setup-env.sh installs it)")
    server = PhpFpm(tmp_path, unix=unix)
    yield server
    server.stop()


@pytest.fixture
def fpm(tmp_path):
    yield from running_fpm(tmp_path)


@pytest.fixture
def fpm_unix(tmp_path):
    yield from running_fpm(tmp_path, unix=True)


def php_site(start_proxy, root, fpm, options=None, **fastcgi):
    """rsp with the site php.test: files from root, scripts on fpm."""
    settings = {"backends": [fpm.address], **fastcgi}
    site = {"root": str(root), "fastcgi": settings, "max_body_size": 32 * MiB}
    return start_proxy(sites={HOST: site}, **(options or {}))


def params_of(response):
    """The NAME=value lines an env script printed, as a dict."""
    assert response.status == 200, f"status {response.status}: {response.decoded[:300]!r}"
    lines = response.decoded.decode().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_php_fpm_on_a_unix_socket(start_proxy, root, fpm_unix):
    """The usual setup: php-fpm on a Unix socket, named "unix:/PATH"; the
    script runs and its parameters are the same; a front controller too."""
    proxy = php_site(start_proxy, root, fpm_unix)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/env.php?x=1")
        assert r.status == 200, r
        p = params_of(r)
        assert p["SCRIPT_FILENAME"] == f"{root}/env.php" and p["QUERY_STRING"] == "x=1", p
        r = c.get("/some/pretty/page")
        assert r.status == 200, r
        p = params_of(r)
        assert p["SCRIPT_NAME"] == "/index.php" and p["REQUEST_URI"] == "/some/pretty/page", p


def test_every_parameter(start_proxy, root, fpm):
    """SCRIPT_FILENAME, SCRIPT_NAME, ..., HTTP_* as CGI/1.1 says, the extra
    params, and no HTTP_PROXY though the client sent Proxy: (httpoxy)."""
    proxy = php_site(start_proxy, root, fpm, params={"APP_ENV": "fts"})
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/env.php?a=1&b=two", headers=[("Proxy", "http://evil.example:3128"), ("X-Custom", "yes"),
                                               ("Cookie", "k=v"), ("x-custom", "too"), ("Cookie", "k2=v2"),
                                               ("User-Agent", "fts")])
        local_port = c.sock.getsockname()[1]
    p = params_of(r)
    assert p["script"] == "env.php"
    assert p["SCRIPT_FILENAME"] == f"{root}/env.php"
    assert p["SCRIPT_NAME"] == "/env.php"
    assert p["PATH_INFO"] == ""
    assert p["DOCUMENT_ROOT"] == str(root)
    assert p["REQUEST_URI"] == "/env.php?a=1&b=two"
    assert p["QUERY_STRING"] == "a=1&b=two"
    assert p["REQUEST_METHOD"] == "GET"
    assert p["CONTENT_LENGTH"] == "" and p["CONTENT_TYPE"] == ""
    assert p["SERVER_NAME"] == HOST
    assert p["SERVER_PORT"] == str(proxy.port)
    assert p["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert p["GATEWAY_INTERFACE"] == "CGI/1.1"
    assert p["REMOTE_ADDR"] == LOOPBACK
    assert p["REMOTE_PORT"] == str(local_port)
    assert p["HTTPS"] == "<unset>", "HTTPS is set only for TLS clients"
    assert p["APP_ENV"] == "fts"
    assert p["HTTP_HOST"] == HOST
    assert p["HTTP_X_CUSTOM"] == "yes, too", "fields of one name, whatever its case, are one variable"
    assert p["HTTP_COOKIE"] == "k=v; k2=v2", "two Cookie headers are one variable"
    assert p["HTTP_USER_AGENT"] == "fts"
    assert p["HTTP_X_FORWARDED_FOR"] == LOOPBACK and p["HTTP_X_REAL_IP"] == LOOPBACK
    assert p["HTTP_PROXY"] == "<unset>", "a client's Proxy header must never become HTTP_PROXY"


def test_post_parameters_and_keepalive(start_proxy, root, fpm):
    """A POST's CONTENT_TYPE and CONTENT_LENGTH; several requests on one
    client connection (and so on pooled php-fpm connections)."""
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        for i in range(6):
            r = c.request("POST", "/env.php", headers=[("Content-Type", "application/x-test")], body=b"x" * (100 + i))
            p = params_of(r)
            assert (p["REQUEST_METHOD"], p["CONTENT_TYPE"], p["CONTENT_LENGTH"], p["body"]) == \
                ("POST", "application/x-test", str(100 + i), str(100 + i))
            assert r.framing == "chunked", "no Content-Length from the script: rsp frames the body"


@pytest.mark.parametrize("size", [MiB, 16 * MiB], ids=["1MiB", "16MiB"])
def test_upload_echoed_byte_exact(start_proxy, root, fpm, size):
    proxy = php_site(start_proxy, root, fpm)
    body = pattern(size)
    with Conn(proxy.port, host=HOST) as c:
        r = c.request("POST", "/echo.php", headers=[("Content-Type", "application/octet-stream")], body=body)
    assert r.status == 200, r.status
    assert_same_bytes(r.decoded, body, "the upload echoed by PHP")


def test_chunked_upload_read_whole_first(start_proxy, root, fpm):
    """A chunked body is read whole first: PHP gets its CONTENT_LENGTH."""
    proxy = php_site(start_proxy, root, fpm)
    body = pattern(300000)
    with Conn(proxy.port, host=HOST) as c:
        r = c.request("POST", "/echo.php", headers=[("Transfer-Encoding", "chunked")],
                      body=chunked(body, [1000, 65536, 100000]))
        e = c.request("POST", "/env.php", headers=[("Transfer-Encoding", "chunked")], body=chunked(b"abc", [1, 2]))
    assert r.status == 200
    assert_same_bytes(r.decoded, body, "the chunked upload echoed by PHP")
    assert params_of(e)["CONTENT_LENGTH"] == "3"


def test_streamed_large_output(start_proxy, root, fpm):
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/big.php?mib=48")
        again = c.get("/env.php")
    assert r.status == 200 and r.complete
    assert len(r.decoded) == 48 * MiB
    assert r.decoded[:32] == b"0123456789abcdef" * 2 and r.decoded[-16:] == b"0123456789abcdef"
    assert params_of(again)["script"] == "env.php", "the connection goes on after a large response"


def test_http10_client_gets_close_framing(start_proxy, root, fpm):
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/env.php", version="1.0")
    assert r.status == 200 and r.framing == "close"
    assert params_of(r)["SERVER_PROTOCOL"] == "HTTP/1.0"


def test_status_location_and_cookies(start_proxy, root, fpm):
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/cookies.php")
        moved = c.get("/redirect.php")
    assert r.status == 404 and r.decoded == b"not here\n"
    assert r.header_values("Set-Cookie") == ["first=1", "second=2"]
    assert moved.status == 302, "a Location without a Status is a 302"
    assert moved.header("Location") == "https://example.org/elsewhere"


def test_stderr_goes_to_the_log(start_proxy, root, fpm):
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/stderr.php")
    assert r.status == 200 and r.decoded == b"done\n"
    wait_for_log(proxy, f"fastcgi {LOOPBACK}:{fpm.port}: stderr: ", 10)
    wait_for_log(proxy, "a note from the script 7f3a", 10)


def test_stderr_is_rate_limited_and_cut(start_proxy, root, fpm):
    """30 requests whose script writes a 300-byte line with a control
    character to STDERR: at most one line a second reaches rsp's log (so
    no more lines than the seconds the requests took, plus one), each cut
    at 200 bytes with "...", the control character made '?'."""
    (root / "noisy.php").write_text('<?php error_log("\\x01noisy" . str_repeat("x", 300)); echo "ok";')
    proxy = php_site(start_proxy, root, fpm)
    started = time.monotonic()
    with Conn(proxy.port, host=HOST) as c:
        for _ in range(30):
            assert c.get("/noisy.php").decoded == b"ok"
    took = time.monotonic() - started
    wait_for_log(proxy, "noisy", 10)
    lines = [line.split(": stderr: ", 1)[1] for line in proxy.stderr().splitlines() if ": stderr: " in line]
    assert 1 <= len(lines) <= int(took) + 2, f"{len(lines)} stderr lines logged in {took:.1f} s"
    for text in lines:
        assert text.endswith("...") and len(text) == 200 + 3, text
        assert "?noisy" in text and "\x01" not in text, text


def test_static_file_beside_scripts_is_a_file(start_proxy, root, fpm):
    """style.css is served by rsp (stage 21's producer: its ETag, its
    Content-Type); a directory without its slash is redirected."""
    (root / "blog").mkdir()
    (root / "blog" / "index.php").write_text(ENV_PHP)
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        css = c.get("/style.css")
        moved = c.get("/blog")
        blog = c.get("/blog/")
    assert css.status == 200 and css.decoded == CSS
    assert css.header("Content-Type").startswith("text/css")
    assert css.header("ETag") is not None, "a file's response carries its validators"
    assert moved.status == 301 and moved.header("Location") == "/blog/"
    p = params_of(blog)
    assert (p["SCRIPT_NAME"], p["SCRIPT_FILENAME"]) == ("/blog/index.php", f"{root}/blog/index.php")


def test_missing_script_and_pretty_urls_go_to_the_front_controller(start_proxy, root, fpm):
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        missing = params_of(c.get("/nothing-here.php"))
        pretty = params_of(c.get("/some/page?view=full"))
        top = params_of(c.get("/"))
        hidden = c.get("/.env")
    assert missing["script"] == "index.php" and missing["SCRIPT_NAME"] == "/index.php"
    assert missing["REQUEST_URI"] == "/nothing-here.php"
    assert pretty["script"] == "index.php" and pretty["SCRIPT_FILENAME"] == f"{root}/index.php"
    assert pretty["REQUEST_URI"] == "/some/page?view=full" and pretty["QUERY_STRING"] == "view=full"
    assert pretty["PATH_INFO"] == ""
    assert top["SCRIPT_NAME"] == "/index.php"
    assert hidden.status == 404, "a hidden name is refused, not handed to the front controller"


def test_path_info_attack_never_runs_the_planted_file(start_proxy, root, fpm):
    """/uploads/cat.jpg/x.php names no file: the front controller answers,
    and the PHP planted in cat.jpg never runs; cat.jpg itself is a file."""
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        attack = c.get("/uploads/cat.jpg/x.php")
        image = c.get("/uploads/cat.jpg")
    with Conn(proxy.port, host=HOST) as c:
        encoded = c.get("/uploads/cat.jpg%2Fx.php")
    assert b"PLANTED-CODE-RAN" not in attack.decoded
    p = params_of(attack)
    assert p["SCRIPT_FILENAME"] == f"{root}/index.php" and p["REQUEST_URI"] == "/uploads/cat.jpg/x.php"
    assert b"PLANTED-CODE-RAN" not in encoded.decoded and encoded.status in (400, 404), \
        "an encoded slash is refused (400 by request checks, 404 by file_path)"
    assert image.status == 200 and image.decoded == PLANTED, "the image is served as it is, never run"


def test_php_fpm_stopped_then_restarted(start_proxy, root, fpm):
    proxy = php_site(start_proxy, root, fpm)
    with Conn(proxy.port, host=HOST) as c:
        assert c.get("/env.php").status == 200
    fpm.stop()
    with Conn(proxy.port, host=HOST) as c:
        down = c.get("/env.php")
    assert down.status in (502, 503), f"php-fpm is down: {down.status}"
    fpm.start()
    with Conn(proxy.port, host=HOST) as c:
        back = c.get("/env.php")
    assert back.status == 200 and params_of(back)["script"] == "env.php"


def connections_to(fpm):
    """The connections php-fpm's Unix socket has now, taken by a child or
    waiting in its accept queue: /proc/net/unix lists each under the
    socket's path, besides the listening socket itself."""
    with open("/proc/net/unix") as f:
        return sum(1 for line in f if line.rstrip("\n").endswith(" " + fpm.socket)) - 1


def test_stop_closes_idle_connections_holding_php_fpm(start_proxy, tmp_path, root):
    """php-fpm with one child, which stays with a kept connection
    (keep_conn = true) until rsp closes it. Client A's request holds the child (gate.php waits for a
    file), client B's gets a second connection, queued at php-fpm; A's
    answer leaves its connection idle in rsp's pool, still holding the
    child, and B's request waits behind it. SIGTERM (shutdown_timeout =
    30): rsp closes its idle backend connections at once, so the child
    takes B's, B gets its 200 with Connection: close, A's idle connection
    is closed, and rsp exits 0 with its normal stop lines, long before
    the 30 s."""
    if PHP_FPM is None:
        pytest.skip("php-fpm8.2 is not installed (Debian's php8.2-fpm; setup-env.sh installs it)")
    fpm = PhpFpm(tmp_path, unix=True, children=1)
    try:
        proxy = php_site(start_proxy, root, fpm, {"shutdown_timeout": 30}, keep_conn=True)
        gate = tmp_path / "gate"
        with Conn(proxy.port, host=HOST) as a, Conn(proxy.port, host=HOST) as b:
            a.send(a.request_bytes("GET", f"/gate.php?file={gate}"))
            wait_for(lambda: connections_to(fpm) == 1, "A's connection at php-fpm", 10)
            b.send(b.request_bytes("GET", "/env.php"))
            wait_for(lambda: connections_to(fpm) == 2, "B's connection queued at php-fpm", 10)
            gate.write_text("")
            r = a.read_response()
            assert r.status == 200 and r.decoded == b"gate opened\n", r
            proxy.process.send_signal(signal.SIGTERM)
            assert b.wait_for_data(15), \
                "B got no answer within 15 s of SIGTERM: rsp's idle connection still holds php-fpm's only child"
            r = b.read_response()
            assert params_of(r)["script"] == "env.php"
            assert "close" in r.connection_tokens(), f"no Connection: close while stopping: {r.headers}"
            assert b.state(5) == "eof" and a.state(5) == "eof", "both client connections end after the answer"
        assert proxy.wait_exit(10) == 0, f"rsp did not exit 0 within 10 s\n{proxy.stderr()}"
        log = proxy.stderr()
        assert "Terminated: stopping; 2 connections open" in log and "rsp: stopped" in log, log
        assert "shutdown_timeout passed" not in log, log
    finally:
        fpm.stop()


class LoadClient(threading.Thread):
    """One client keeping a keep-alive connection busy with GET /env.php
    until told to stop (or `limit` requests), reconnecting only where rsp
    said Connection: close. Each outcome is recorded with the phase the
    test was in when the request went out: "200" (the script's whole
    answer), "502" or "503" (rsp's own), or a failure: anything else, an
    answer cut short, the connection ended or reset without one, or no
    answer within the socket timeout (a hang)."""

    def __init__(self, port, phase, limit=20000):
        super().__init__(daemon=True)
        self.port, self.phase, self.limit = port, phase, limit
        self.outcomes = []  # (phase, outcome)
        self.halt = threading.Event()

    def count(self, phase, outcome):
        return sum(1 for p, o in self.outcomes if p == phase and o == outcome)

    def failures(self):
        return [(p, o) for p, o in self.outcomes if o not in ("200", "502", "503")]

    def outcome(self, r):
        if r.status is None:
            return f"the connection ended without an answer (reset: {r.reset}): {r.raw[:100]!r}"
        if not r.complete:
            return f"a {r.status} cut short ({r.framing}): {r.raw[:200]!r}"
        if r.status == 200:
            lines = r.decoded.decode(errors="replace").splitlines()
            if lines[:1] != ["script=env.php"] or not lines[-1].startswith("body="):
                return f"a 200 that is not the script's whole answer: {r.decoded[:200]!r}"
            return "200"
        if r.status in (502, 503):
            return str(r.status)
        return f"status {r.status}: {r.raw[:200]!r}"

    def run(self):
        conn = None
        try:
            while not self.halt.is_set() and len(self.outcomes) < self.limit:
                phase = self.phase[0]
                if conn is None:
                    conn = Conn(self.port, timeout=15, host=HOST)
                r = conn.get("/env.php")
                outcome = self.outcome(r)
                self.outcomes.append((phase, outcome))
                if outcome not in ("200", "502", "503"):
                    return
                if "close" in r.connection_tokens() or r.version != "HTTP/1.1":
                    conn.close()
                    conn = None
        except TimeoutError:
            self.outcomes.append((phase, "no answer within 15 s"))
        except (OSError, AssertionError) as e:  # a connect refused, a reset while sending, not HTTP
            self.outcomes.append((phase, f"{type(e).__name__}: {e}"))
        finally:
            if conn is not None:
                conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGQUIT], ids=["SIGTERM", "SIGQUIT"])
def test_php_fpm_stopped_and_restarted_under_load(start_proxy, tmp_path, root, sig):
    """Six keep-alive clients send requests without pause while php-fpm
    (on its Unix socket) is stopped, SIGTERM (children quit at once) or
    SIGQUIT (requests under way finish), and started again on the same
    socket. Every request gets a whole answer: the script's 200, or rsp's
    502 or 503; none hangs, none is cut short, no connection ends without
    an answer. While php-fpm is gone, every answer is a 502 or 503, and
    rsp logs the backend down and that it answers 502; once it is back,
    every client gets 200s again (down_time = 0.5 s), rsp logs the
    backend up and serving again, and is still running. php-fpm has a
    child for each client, so that no request waits at php-fpm behind
    another client's."""
    if PHP_FPM is None:
        pytest.skip("php-fpm8.2 is not installed (Debian's php8.2-fpm; setup-env.sh installs it)")
    n = 6
    fpm = PhpFpm(tmp_path, unix=True, children=n)
    try:
        run_under_load(start_proxy, root, fpm, sig, n)
    finally:
        fpm.stop()


@pytest.mark.parametrize("keep_conn", [False, None], ids=["keep_conn-false", "default"])
def test_more_clients_than_php_fpm_children(start_proxy, tmp_path, root, keep_conn):
    """Four keep-alive clients, 10 requests each, all at once, and php-fpm
    with one child. A child serves one connection until it closes; had rsp
    kept its connections (keep_conn = true), the child would stay with the
    first and the other clients' requests would wait behind it until
    response_timeout (504). Without keep_conn every connection is closed
    after its answer and the child takes the next: all 40 get the
    script's 200."""
    if PHP_FPM is None:
        pytest.skip("php-fpm8.2 is not installed (Debian's php8.2-fpm; setup-env.sh installs it)")
    fpm = PhpFpm(tmp_path, unix=True, children=1)
    try:
        options = {} if keep_conn is None else {"keep_conn": keep_conn}
        proxy = php_site(start_proxy, root, fpm, {"response_timeout": 20}, **options)
        phase = ["all"]
        clients = [LoadClient(proxy.port, phase, limit=10) for _ in range(4)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(60)
        assert not any(c.is_alive() for c in clients), "a client still waits for an answer after 60 s"
        outcomes = [o for c in clients for _, o in c.outcomes]
        assert outcomes == ["200"] * 40, f"not 40 answers of the script: {sorted(set(outcomes))}"
        assert "response_timeout" not in proxy.stderr(), proxy.stderr()[-2000:]
    finally:
        fpm.stop()


def run_under_load(start_proxy, root, fpm, sig, n):
    """The body of the test above: n clients, php-fpm stopped with sig."""
    proxy = php_site(start_proxy, root, fpm, {"down_time": 0.5})
    phase = ["before"]
    clients = [LoadClient(proxy.port, phase) for _ in range(n)]
    for c in clients:
        c.start()
    try:
        wait_for(lambda: all(c.count("before", "200") > 0 or c.failures() for c in clients),
                 "a 200 for every client before php-fpm stops", 20)
        phase[0] = "stopping"
        assert fpm.stop(sig), f"php-fpm did not exit on {sig.name} within 10 s"
        phase[0] = "down"
        wait_for(lambda: all(c.count("down", "502") + c.count("down", "503") > 0 or c.failures()
                             or not c.is_alive() for c in clients),
                 "a 502 or 503 for every client while php-fpm is stopped", 20)
        phase[0] = "starting"
        fpm.start()
        phase[0] = "back"
        wait_for(lambda: all(c.count("back", "200") > 0 or c.failures() or not c.is_alive() for c in clients),
                 "a 200 for every client once php-fpm is back", 20)
    finally:
        for c in clients:
            c.halt.set()
        for c in clients:
            c.join(30)
    assert not any(c.is_alive() for c in clients), "a client still waits for an answer 30 s after the end"
    failures = [f for c in clients for f in c.failures()]
    assert not failures, f"{len(failures)} requests without a whole answer: {failures[:5]}"
    outcomes = [(p, o) for c in clients for p, o in c.outcomes]
    down = [o for p, o in outcomes if p == "down"]
    assert down and all(o in ("502", "503") for o in down), f"php-fpm was gone, yet: {sorted(set(down))}"
    for c in clients:
        assert c.count("back", "200") > 0, f"a client got no 200 after the restart: {c.outcomes[-5:]}"
    assert proxy.alive(), "rsp is not running after php-fpm's restart"
    log = proxy.stderr()
    name = fpm.address
    for line in (f"backend {name} is down (", "no backend can be reached; answering 502",
                 f"backend {name} is up again", "a backend answered again; serving clients"):
        assert line in log, f"no {line!r} in rsp's log:\n{log[-2000:]}"


def check(rsp, tmp_path, body):
    path = tmp_path / "rsp.lua"
    path.write_text(f"listen = {lua_string(f'{LOOPBACK}:{free_port()}')}\n{body}\n")
    return run_rsp(rsp, ["-t", str(path)], tmp_path), path


@pytest.mark.parametrize("fastcgi, setting, words", [
    ("{ backends = { '127.0.0.1:9000' } }", "sites[\"php.test\"].fastcgi", ["root"]),
], ids=["without-root"])
def test_fastcgi_needs_root(rsp, tmp_path, fastcgi, setting, words):
    result, path = check(rsp, tmp_path, f"sites = {{ ['php.test'] = {{ backends = {{ '127.0.0.1:8001' }}, "
                                        f"fastcgi = {fastcgi} }} }}")
    assert_config_error(result, path, setting, words=words)


@pytest.mark.parametrize("fastcgi, setting", [
    ("{ }", "sites[\"php.test\"].fastcgi.backends"),
    ("{ backends = { '127.0.0.1:9000' }, index = '../x.php' }", "sites[\"php.test\"].fastcgi.index"),
    ("{ backends = { '127.0.0.1:9000' }, extensions = { 'php' } }", "sites[\"php.test\"].fastcgi.extensions"),
    ("{ backends = { '127.0.0.1:9000' }, params = { ['app-env'] = 'x' } }", "sites[\"php.test\"].fastcgi.params"),
    ("{ backends = { '127.0.0.1:9000' }, params = { APP = 1 } }", "sites[\"php.test\"].fastcgi.params.APP"),
    ("{ backends = { '127.0.0.1:9000' }, indexx = 'a.php' }", "sites[\"php.test\"].fastcgi"),
    ("'127.0.0.1:9000'", "sites[\"php.test\"].fastcgi"),
    ("{ backends = { '127.0.0.1:9000' }, keep_conn = 'yes' }", "sites[\"php.test\"].fastcgi.keep_conn"),
], ids=["no-backends", "index-path", "extension-without-dot", "param-name", "param-value", "typo", "not-a-table",
        "keep-conn-not-boolean"])
def test_fastcgi_config_errors(rsp, tmp_path, fastcgi, setting):
    root = tmp_path / "www"
    root.mkdir()
    result, path = check(rsp, tmp_path, f"sites = {{ ['php.test'] = {{ root = {lua_string(str(root))}, "
                                        f"fastcgi = {fastcgi} }} }}")
    assert_config_error(result, path, setting)


def test_tls_and_http2(start_proxy, tmp_path, root, fpm):
    """Over TLS HTTPS=on; an HTTP/2 stream gets the script's output as
    DATA (SERVER_PROTOCOL HTTP/2.0), large output too; an upload on a
    stream reaches PHP whole."""
    from files_util import WWW, h2_client, start_tls_proxy
    site = {"root": str(root), "fastcgi": {"backends": [f"{LOOPBACK}:{fpm.port}"]}}
    proxy = start_tls_proxy(start_proxy, tmp_path, sites={WWW: site})
    upload = pattern(200000)
    with h2_client(proxy) as c:
        env, big = c.get("/env.php?h=2"), c.get("/big.php?mib=8")
        echoed = c.wait_ended(c.request("POST", "/echo.php", body=upload))
    assert env.status == 200, env.status
    p = dict(line.split("=", 1) for line in env.body.decode().splitlines())
    assert (p["HTTPS"], p["SERVER_PROTOCOL"], p["QUERY_STRING"], p["SERVER_NAME"]) == ("on", "HTTP/2.0", "h=2", WWW)
    assert big.status == 200 and len(big.body) == 8 * MiB
    assert big.body[:16] == b"0123456789abcdef" and big.body[-16:] == b"0123456789abcdef"
    assert echoed.status == 200
    assert_same_bytes(echoed.body, upload, "an HTTP/2 upload (no Content-Length: read whole) echoed by PHP")


def test_head_and_response_timeout(start_proxy, root, fpm):
    """HEAD gets the script's head and no body; a script slower than
    response_timeout gets 504, and the next request is served."""
    proxy = php_site(start_proxy, root, fpm, options={"response_timeout": 1})
    with Conn(proxy.port, host=HOST) as c:
        head = c.request("HEAD", "/cookies.php")
        after = c.get("/env.php")
    assert head.status == 404 and head.body == b"" and head.header_values("Set-Cookie") == ["first=1", "second=2"]
    assert params_of(after)["REQUEST_METHOD"] == "GET"
    with Conn(proxy.port, host=HOST) as c:
        slow = c.get("/slow.php")
    assert slow.status == 504, slow.status
    with Conn(proxy.port, host=HOST) as c:
        assert params_of(c.get("/env.php"))["script"] == "env.php"


# -- a FastCGI responder of the test's own, for what php-fpm never sends -----------------


def record(rtype, content=b"", request_id=1, version=1, padding=None):
    """One FastCGI record's bytes (padded to 8 unless padding is given)."""
    import struct
    pad = (8 - len(content) % 8) % 8 if padding is None else padding
    return struct.pack(">BBHHBB", version, rtype, request_id, len(content), pad, 0) + content + b"\0" * pad


def end_request(protocol_status=0, app_status=0):
    import struct
    return record(3, struct.pack(">IB3x", app_status, protocol_status))


class Responder:
    """A FastCGI responder on 127.0.0.1 that reads each request (records
    until the empty STDIN) and answers with answers[i] for the i-th request
    on any connection (then closes if it was the last one). Counts the
    connections and remembers each BEGIN_REQUEST's flags."""

    def __init__(self, answers):
        import socket
        import threading
        self.answers = list(answers)
        self.connections = 0
        self.keep_flags = []
        self.listener = socket.socket()
        self.listener.bind((LOOPBACK, 0))
        self.listener.listen(16)
        self.host, self.port = LOOPBACK, self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read_request(self, conn, pending):
        import struct
        while True:
            while len(pending) >= 8:
                _, rtype, _, length, pad, _ = struct.unpack(">BBHHBB", pending[:8])
                if len(pending) < 8 + length + pad:
                    break
                content = pending[8:8 + length]
                pending = pending[8 + length + pad:]
                if rtype == 1:
                    self.keep_flags.append(content[2] & 1)
                if rtype == 5 and length == 0:
                    return pending
            data = conn.recv(65536)
            if not data:
                return None
            pending += data

    def _serve(self):
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            pending = b""
            with conn:
                while self.answers:
                    pending = self._read_request(conn, pending)
                    if pending is None:
                        break
                    conn.sendall(self.answers.pop(0))

    def close(self):
        self.listener.close()


HELLO = record(6, b"Content-Type: text/plain\r\n\r\nhello") + record(6) + end_request()


def responder_site(start_proxy, tmp_path, responder, **fastcgi):
    www = tmp_path / "fake"
    www.mkdir()
    (www / "index.php").write_text("<?php")
    backend = f"{LOOPBACK}:{responder.port}"
    return start_proxy(sites={HOST: {"root": str(www), "fastcgi": {"backends": [backend], **fastcgi}}})


def test_connection_closed_without_keep_conn(start_proxy, tmp_path):
    """By default KEEP_CONN is not asked: the responder may close after
    each answer, and every request has a connection of its own."""
    responder = Responder([HELLO, HELLO, HELLO])
    proxy = responder_site(start_proxy, tmp_path, responder)
    with Conn(proxy.port, host=HOST) as c:
        for _ in range(3):
            r = c.get("/")
            assert r.status == 200 and r.decoded == b"hello"
    assert responder.keep_flags == [0, 0, 0]
    assert responder.connections == 3, f"{responder.connections} connections for 3 requests"
    responder.close()


def test_connection_kept_with_keep_conn(start_proxy, tmp_path):
    """With keep_conn = true KEEP_CONN is asked, and after a clean
    END_REQUEST the connection carries the next request."""
    responder = Responder([HELLO, HELLO, HELLO])
    proxy = responder_site(start_proxy, tmp_path, responder, keep_conn=True)
    for _ in range(3):
        with Conn(proxy.port, host=HOST) as c:
            r = c.get("/")
            assert r.status == 200 and r.decoded == b"hello"
    assert responder.keep_flags == [1, 1, 1]
    assert responder.connections == 1, f"{responder.connections} connections for 3 requests"
    responder.close()


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\n\r\n",
    record(6, b"Content-Type: text/plain\r\n\r\nx", version=2) + end_request(),
    record(6, b"Content-Type: text/plain\r\n\r\nx", request_id=2) + end_request(),
    record(4, b"") + end_request(),
    record(3, b"\0" * 7) + end_request(),
    end_request(protocol_status=2),
    record(6, b"no head here\r\n\r\n") + end_request(),
    record(6, b"Status: 99 Odd\r\n\r\n") + end_request(),
    record(6, b"Content-Type: text/plain\r\n") + end_request(),
], ids=["http", "version-2", "request-id-2", "params-back", "short-end", "overloaded", "not-a-cgi-head",
        "bad-status", "end-before-head-ends"])
def test_malformed_answers_get_502(start_proxy, tmp_path, answer):
    responder = Responder([answer, HELLO])
    proxy = responder_site(start_proxy, tmp_path, responder, keep_conn=True)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/")
    assert r.status == 502, r.status
    with Conn(proxy.port, host=HOST) as c:
        again = c.get("/")
    assert again.status == 200 and again.decoded == b"hello"
    assert responder.connections == 2, "the connection that carried nonsense is not reused"
    responder.close()


def test_malformed_after_the_head_cuts_off(start_proxy, tmp_path):
    """Malformed records after a head and 8 KiB of body (more than rsp
    holds back to send with the head): the client has had the head and is
    cut off. After a head and a few bytes read with the bad record, none
    of it has left yet: a clean 502."""
    head = b"Content-Type: text/plain\r\n\r\n"
    long = record(6, head + b"partial " * 1024) + record(6, b"x", version=9)
    short = record(6, head + b"partial") + record(6, b"x", version=9)
    responder = Responder([long, HELLO, short, HELLO])
    proxy = responder_site(start_proxy, tmp_path, responder)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/")
    assert r.status == 200 and not r.complete, "the client sees the response end before its end"
    with Conn(proxy.port, host=HOST) as c:
        assert c.get("/").decoded == b"hello"
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/")
        assert r.status == 502 and r.complete, r
        assert c.get("/").decoded == b"hello", "the client's connection stays after a clean 502"
    assert "sent malformed FastCGI records" in proxy.stderr()
    responder.close()


def test_health_check_over_fastcgi(start_proxy, root, fpm):
    """A fastcgi pool's health_check asks php-fpm in FastCGI records (its
    ping.path): php-fpm stopped is marked down (503 at once), restarted
    is marked up and served."""
    proxy = php_site(start_proxy, root, fpm,
                     health_check={"path": "/ping", "interval": 0.2, "timeout": 1, "rise": 1, "fall": 1})
    with Conn(proxy.port, host=HOST) as c:
        assert params_of(c.get("/env.php"))["script"] == "env.php"
    assert f"backend {LOOPBACK}:{fpm.port} is down" not in proxy.stderr(), "php-fpm answers its ping"
    fpm.stop()
    wait_for_log(proxy, f"backend {LOOPBACK}:{fpm.port} is down: health check failed", 10)
    with Conn(proxy.port, host=HOST) as c:
        assert c.get("/env.php").status == 503
    fpm.start()
    wait_for_log(proxy, f"backend {LOOPBACK}:{fpm.port} is up: health check passed", 10)
    with Conn(proxy.port, host=HOST) as c:
        assert params_of(c.get("/env.php"))["script"] == "env.php"


def test_backend_speaks_one_protocol(rsp, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    result, path = check(rsp, tmp_path, f"sites = {{ ['php.test'] = {{ root = {lua_string(str(root))}, "
                                        "fastcgi = { backends = { '127.0.0.1:9000' } } }, "
                                        "['app.test'] = { backends = { '127.0.0.1:9000' } } }")
    assert_config_error(result, path, 'sites["php.test"].fastcgi.backends', words=["127.0.0.1:9000", "protocol"])


def test_status_shows_the_fastcgi_pool(start_proxy, root, fpm):
    from test_status import start_with_status, status_json
    site = {"root": str(root), "fastcgi": {"backends": [f"{LOOPBACK}:{fpm.port}"]}}
    proxy = start_with_status(start_proxy, sites={HOST: site})
    with Conn(proxy.port, host=HOST) as c:
        assert params_of(c.get("/env.php"))["script"] == "env.php"
    pools = {p["name"]: p for p in status_json(proxy)["pools"]}
    assert f"{HOST} fastcgi" in pools, list(pools)
    backends = pools[f"{HOST} fastcgi"]["backends"]
    assert [b["name"] for b in backends] == [f"{LOOPBACK}:{fpm.port}"], backends


def test_script_content_length(start_proxy, tmp_path):
    """A script's Content-Length goes to the client: bytes beyond it are
    dropped (the FastCGI connection stays good); fewer is a cut-off once
    the client has had part of the response (8 KiB of body), and a clean
    502 while it has had none (a few bytes, held back with the head)."""
    longer = record(6, b"Content-Length: 3\r\n\r\nabcdef") + record(6) + end_request()
    shorter = record(6, b"Content-Length: 10000\r\n\r\n" + b"a" * 8192) + record(6) + end_request()
    tiny = record(6, b"Content-Length: 10\r\n\r\nabc") + record(6) + end_request()
    responder = Responder([longer, HELLO, shorter, HELLO, tiny, HELLO])
    proxy = responder_site(start_proxy, tmp_path, responder, keep_conn=True)
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/")
        assert r.status == 200 and r.framing == "length" and r.body == b"abc"
        assert c.get("/").decoded == b"hello"
    with Conn(proxy.port, host=HOST) as c:
        cut = c.get("/")
    assert cut.status == 200 and not cut.complete
    with Conn(proxy.port, host=HOST) as c:
        assert c.get("/").decoded == b"hello"
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/")
        assert r.status == 502 and r.complete, r
        assert c.get("/").decoded == b"hello"
    assert responder.connections == 3, "only the connections of the short responses are given up"
    responder.close()


def test_compressed_script_output(start_proxy, root, fpm):
    import gzip
    (root / "page.php").write_text('<?php header("Content-Type: text/html"); echo str_repeat("<p>hello</p>", 500);')
    site = {"root": str(root), "fastcgi": {"backends": [f"{LOOPBACK}:{fpm.port}"]}, "compress": True}
    proxy = start_proxy(sites={HOST: site})
    with Conn(proxy.port, host=HOST) as c:
        r = c.get("/page.php", headers=[("Accept-Encoding", "gzip")])
    assert r.status == 200 and r.header("Content-Encoding") == "gzip"
    assert gzip.decompress(r.decoded) == b"<p>hello</p>" * 500
