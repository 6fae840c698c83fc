"""The access log (stage 11): one line per response rsp sends, backend
responses and rsp's own answers alike, in the combined format

    127.0.0.1 - - [25/Nov/2026:13:40:55 +0000] "GET /p?q=1 HTTP/1.1" 200 123 "http://ref/" "agent/1.0"

(client address, time, request line as received, status, body bytes sent
to the client, Referer, User-Agent; inside quotes `"`, `\\` and bytes
below 0x20 or from 0x7f on are written \\xHH), or with access_log_format =
"timed" two more fields: the request time in seconds with three decimals
and the backend's name as configured in quotes ("-" for rsp's own
answers). goaccess must read it with --log-format=COMBINED. SIGUSR1
reopens the file (after a rename by logrotate); lines are buffered, and
written at least once a second and at exit.

Lines may reach the file up to a second after the response: every read
of the log polls (bounded) until the expected number of lines is there.
"""

import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from client import Conn, exchange, request
from netutil import LOOPBACK, free_port, wait_for, wait_until_listening
from proxy import proxy_arguments

pytestmark = pytest.mark.stage(11)

POLL_TIMEOUT = 5.0  # s: a bound on waiting for lines (rsp writes them at least once a second)
SITE = "ka.test"    # the site the backend serves; any other Host gets rsp's own 421

# What a quoted field may hold: printable ASCII but `"` and `\`, or \xHH.
QUOTED = r'(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\x[0-9A-Fa-f]{2})*'
LINE = re.compile(
    r'^(?P<address>[0-9a-fA-F.:]+) - - \[(?P<time>[^\]]+)\] '
    rf'"(?P<request>{QUOTED})" (?P<status>\d{{3}}) (?P<bytes>\d+) "(?P<referer>{QUOTED})" "(?P<agent>{QUOTED})"'
    rf'(?: (?P<seconds>\d+\.\d{{3}}) "(?P<backend>{QUOTED})")?$')


# -- helpers -----------------------------------------------------------------------

def escaped(value):
    """How the log writes `value` (bytes, or str as latin-1) inside quotes."""
    if isinstance(value, str):
        value = value.encode("latin-1")
    return "".join(f"\\x{b:02x}" if b in (0x22, 0x5C) or b < 0x20 or b >= 0x7F else chr(b) for b in value)


def hex_lower(text):
    """`text` with the hex digits of its \\xHH escapes lowercased (either case is fine)."""
    return re.sub(r"\\x([0-9A-Fa-f]{2})", lambda m: "\\x" + m.group(1).lower(), text)


def read_lines(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    assert not data or data.endswith(b"\n"), f"the log ends in the middle of a line: {data[-200:]!r}"
    return data.decode("latin-1").splitlines()


def wait_lines(path, count):
    """Waits (bounded) until the log at `path` has `count` lines; fails if
    it has more. Returns them."""
    wait_for(lambda: len(read_lines(path)) >= count, f"{count} lines in {path}", POLL_TIMEOUT)
    lines = read_lines(path)
    assert len(lines) == count, f"expected {count} lines in {path}, got {len(lines)}:\n" + "\n".join(lines)
    return lines


def parse(line, timed=False):
    """The fields of one log line (a dict); checks its shape, and that its
    time parses and is within a minute of now."""
    m = LINE.match(line)
    assert m, f"not an access log line: {line!r}"
    fields = m.groupdict()
    if timed:
        assert fields["seconds"] is not None, f"no request time and backend in a timed line: {line!r}"
    else:
        assert fields["seconds"] is None, f"extra fields in a combined line: {line!r}"
    when = datetime.datetime.strptime(fields["time"], "%d/%b/%Y:%H:%M:%S %z")
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - when).total_seconds()) < 60, f"the time {fields['time']!r} is not now ({now})"
    return fields


def assert_line(line, request_line, status, nbytes, referer="-", agent="-", address=LOOPBACK, timed=False,
                backend=None):
    """One log line says what it must: client address, request line,
    status, body bytes (an int, or a tuple of acceptable ones), Referer
    and User-Agent (raw values, or "-" when absent); for timed lines the
    backend name (or "-"). Returns the fields."""
    fields = parse(line, timed)
    assert fields["address"] == address, line
    assert hex_lower(fields["request"]) == escaped(request_line), line
    assert int(fields["status"]) == status, line
    allowed = nbytes if isinstance(nbytes, tuple) else (nbytes,)
    assert int(fields["bytes"]) in allowed, f"{line!r}: expected {' or '.join(map(str, allowed))} body bytes"
    assert hex_lower(fields["referer"]) == (referer if referer == "-" else escaped(referer)), line
    assert hex_lower(fields["agent"]) == (agent if agent == "-" else escaped(agent)), line
    if timed:
        assert fields["backend"] == (backend or "-"), line
    return fields


@pytest.fixture
def ka(make_keepalive_backend):
    return make_keepalive_backend("ka")


@pytest.fixture
def log_path(tmp_path):
    return str(tmp_path / "access.log")


def start_logging(start_proxy, ka, log_path, **options):
    """rsp serving site ka.test (only) with the access log at log_path."""
    return start_proxy(sites={SITE: [ka]}, access_log=log_path, **options)


def ask(proxy, path, method="GET", headers=(), **options):
    """One request for the site (Connection: close); the Response."""
    return request(proxy.port, path, method=method, headers=headers, host=options.pop("host", SITE), **options)


# -- the combined format --------------------------------------------------------------

def test_combined_lines(ka, start_proxy, log_path):
    """Requests of many kinds each give one line, in order, with the right
    fields: a query string with Referer and User-Agent, neither, an empty
    body, a HEAD (0 bytes), a backend's 404, rsp's own 421 for an unknown
    Host, a POST, a client from 127.0.0.2, two requests on one keep-alive
    connection and an HTTP/1.0 one after them."""
    proxy = start_logging(start_proxy, ka, log_path)
    expected = []   # (request line, status, bytes, referer, agent, address)

    r = ask(proxy, "/cl?size=123&q=1", headers=[("Referer", "http://ref.example/page?x=1"),
                                                  ("User-Agent", "agent/1.0 (test; rsp)")])
    assert r.status == 200 and len(r.body) == 123
    expected.append(("GET /cl?size=123&q=1 HTTP/1.1", 200, 123, "http://ref.example/page?x=1",
                     "agent/1.0 (test; rsp)", LOOPBACK))
    r = ask(proxy, "/cl?size=4567")
    assert r.status == 200 and len(r.body) == 4567
    expected.append(("GET /cl?size=4567 HTTP/1.1", 200, 4567, "-", "-", LOOPBACK))
    r = ask(proxy, "/cl?size=0")
    assert r.status == 200 and r.body == b""
    expected.append(("GET /cl?size=0 HTTP/1.1", 200, 0, "-", "-", LOOPBACK))
    r = ask(proxy, "/cl?size=500", method="HEAD", headers=[("User-Agent", "head-agent")])
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "500", r
    expected.append(("HEAD /cl?size=500 HTTP/1.1", 200, 0, "-", "head-agent", LOOPBACK))
    r = ask(proxy, "/status?code=404")
    assert r.status == 404 and r.body
    expected.append(("GET /status?code=404 HTTP/1.1", 404, len(r.body), "-", "-", LOOPBACK))
    r = ask(proxy, "/nowhere", host="unknown.test", headers=[("Referer", "http://elsewhere/")])
    assert r.status == 421 and r.body
    expected.append(("GET /nowhere HTTP/1.1", 421, len(r.body), "http://elsewhere/", "-", LOOPBACK))
    r = ask(proxy, "/echo?post=1", method="POST", body=b"hello, log")
    assert r.status == 200 and r.json()["body"] == "hello, log"
    expected.append(("POST /echo?post=1 HTTP/1.1", 200, len(r.body), "-", "-", LOOPBACK))
    r = ask(proxy, "/cl?size=77", source="127.0.0.2")
    assert r.status == 200
    expected.append(("GET /cl?size=77 HTTP/1.1", 200, 77, "-", "-", "127.0.0.2"))
    with Conn(proxy.port, host=SITE) as c:
        for size in (10, 20):
            r = c.get(f"/cl?size={size}", headers=[("User-Agent", "kept/2")])
            assert r.status == 200 and len(r.body) == size
            expected.append((f"GET /cl?size={size} HTTP/1.1", 200, size, "-", "kept/2", LOOPBACK))
        r = c.request("GET", "/cl?size=30", version="1.0")
        assert r.status == 200 and len(r.body) == 30
        expected.append(("GET /cl?size=30 HTTP/1.0", 200, 30, "-", "-", LOOPBACK))

    lines = wait_lines(log_path, len(expected))
    for line, (request_line, status, nbytes, referer, agent, address) in zip(lines, expected):
        assert_line(line, request_line, status, nbytes, referer, agent, address)


def test_chunked_response_bytes(ka, start_proxy, log_path):
    """A chunked response's line counts the body bytes the client got:
    those on the wire, or (a reading the spec leaves open) the decoded
    ones; never the head's."""
    proxy = start_logging(start_proxy, ka, log_path)
    with Conn(proxy.port, host=SITE) as c:
        r = c.get("/chunked?size=3000&chunks=4")
        assert r.status == 200 and r.framing == "chunked" and len(r.decoded) == 3000, r
    (line,) = wait_lines(log_path, 1)
    assert_line(line, "GET /chunked?size=3000&chunks=4 HTTP/1.1", 200, (len(r.body), len(r.decoded)))


def test_quotes_and_control_bytes_escaped(ka, start_proxy, log_path):
    """Inside the quoted fields `"`, `\\`, a tab and a byte from 0x80 on
    are written as \\xHH, so that a User-Agent or Referer cannot forge
    fields; the line still parses, and the request line (with a `"` in
    the target) too."""
    proxy = start_logging(start_proxy, ka, log_path)
    agent = 'evil" 200 999 "x\\y\tz\xe9'
    referer = 'http://r/"q"'
    r = ask(proxy, '/cl?size=5&a="b"', headers=[("User-Agent", agent), ("Referer", referer)])
    assert r.status == 200, r
    (line,) = wait_lines(log_path, 1)
    fields = assert_line(line, 'GET /cl?size=5&a="b" HTTP/1.1', 200, 5, referer, agent)
    assert '"' not in fields["agent"] and "\t" not in fields["agent"] and "\xe9" not in fields["agent"], line
    assert hex_lower(fields["agent"]) == 'evil\\x22 200 999 \\x22x\\x5cy\\x09z\\xe9', line


def test_bad_request_logged(ka, start_proxy, log_path):
    """rsp's own 400 for a request target with a byte from 0x80 on is
    logged too, with the request line as received (that byte escaped)
    and the size of the error page the client got."""
    proxy = start_logging(start_proxy, ka, log_path)
    r = exchange(proxy.port, b"GET /caf\xe9 HTTP/1.1\r\nHost: " + SITE.encode() + b"\r\n\r\n")
    assert r.status == 400, r
    (line,) = wait_lines(log_path, 1)
    assert_line(line, b"GET /caf\xe9 HTTP/1.1", 400, len(r.body))
    assert ka.requests == 0


def test_empty_lines_before_the_request_line(ka, start_proxy, log_path):
    """Empty lines before a request line are allowed (RFC 9112 2.2) and are
    not part of it: the log shows the request line itself."""
    proxy = start_logging(start_proxy, ka, log_path)
    r = exchange(proxy.port, b"\r\n\r\nGET /cl?size=3 HTTP/1.1\r\nHost: " + SITE.encode() +
                 b"\r\nConnection: close\r\n\r\n")
    assert r.status == 200, r
    (line,) = wait_lines(log_path, 1)
    assert_line(line, "GET /cl?size=3 HTTP/1.1", 200, 3)


# -- the timed format ----------------------------------------------------------------------

def test_timed_lines(ka, start_proxy, log_path):
    """access_log_format = "timed": each line ends with the request time
    (three decimals) and the backend's name as configured in quotes, "-"
    for rsp's own 421; a request the backend answers after 0.3 s took at
    least that long."""
    proxy = start_logging(start_proxy, ka, log_path, access_log_format="timed")
    name = f"{LOOPBACK}:{ka.port}"
    r = ask(proxy, "/cl?size=50", headers=[("User-Agent", "agent/1.0")])
    assert r.status == 200
    r = ask(proxy, "/delay?seconds=0.3&size=60")
    assert r.status == 200 and len(r.body) == 60
    own = ask(proxy, "/", host="unknown.test")
    assert own.status == 421
    lines = wait_lines(log_path, 3)
    quick = assert_line(lines[0], "GET /cl?size=50 HTTP/1.1", 200, 50, agent="agent/1.0", timed=True,
                        backend=name)
    slow = assert_line(lines[1], "GET /delay?seconds=0.3&size=60 HTTP/1.1", 200, 60, timed=True, backend=name)
    assert_line(lines[2], "GET / HTTP/1.1", 421, len(own.body), timed=True, backend="-")
    assert 0.25 <= float(slow["seconds"]) < 30, lines[1]
    assert float(quick["seconds"]) < 30, lines[0]


# -- goaccess -------------------------------------------------------------------------------

def goaccess_report(log, tmp_path):
    """goaccess's JSON report on `log`, read with --log-format=COMBINED."""
    binary = shutil.which("goaccess")
    if binary is None:
        pytest.skip("goaccess is not installed (apt-get install goaccess; setup-env.sh installs it)")
    out = tmp_path / "report.json"
    result = subprocess.run([binary, log, "--log-format=COMBINED", "--no-global-config", "-o", str(out)],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                            cwd=str(tmp_path))
    assert result.returncode == 0, f"goaccess failed ({result.returncode}): {result.stderr[-2000:]}"
    return json.loads(out.read_text())


@pytest.mark.parametrize("log_format", ["combined", "timed"])
def test_goaccess_reads_the_log(ka, start_proxy, log_path, tmp_path, log_format):
    """goaccess --log-format=COMBINED reads every line of a log of 24
    varied requests (quotes in the User-Agent and the target, a Referer,
    HEADs, 404s, rsp's own 421s, POSTs), in either format: 24 requests,
    all valid, none failed."""
    proxy = start_logging(start_proxy, ka, log_path, access_log_format=log_format)
    count = 0
    for i in range(4):
        for path, method, host, headers, status in [
            (f"/cl?size={100 + i}", "GET", SITE, [("User-Agent", f'Mozilla/5.0 "quoted" \\ {i}')], 200),
            (f'/page/{i}?q="x"', "GET", SITE, [("Referer", f"http://ref.example/{i}")], 200),
            (f"/cl?size={i}", "HEAD", SITE, [], 200),
            ("/status?code=404", "GET", SITE, [("User-Agent", "curl/8.0")], 404),
            ("/x", "GET", "unknown.test", [], 421),
            ("/echo", "POST", SITE, [], 200),
        ]:
            r = ask(proxy, path, method=method, host=host, headers=headers, body=b"b" * i if method == "POST" else b"")
            assert r.status == status, f"{method} {path}: {r!r}"
            count += 1
    wait_lines(log_path, count)
    general = goaccess_report(log_path, tmp_path)["general"]
    assert general["failed_requests"] == 0, general
    assert general["total_requests"] == count and general["valid_requests"] == count, general


# -- SIGUSR1, reloads and exit ---------------------------------------------------------------

def test_sigusr1_reopens_after_rename(ka, start_proxy, log_path):
    """logrotate's way: the log is renamed, more requests are served (their
    lines go on to the renamed file, still open), then SIGUSR1: the next
    requests' lines go to a fresh file at the configured path, and the
    renamed file keeps exactly the lines from before the signal. A second
    SIGUSR1 without a rename appends to the same file."""
    proxy = start_logging(start_proxy, ka, log_path)
    for i in range(3):
        assert ask(proxy, f"/before/{i}").status == 200
    wait_lines(log_path, 3)
    rotated = log_path + ".1"
    os.rename(log_path, rotated)
    for i in range(2):
        assert ask(proxy, f"/renamed/{i}").status == 200
    proxy.process.send_signal(signal.SIGUSR1)
    wait_for(lambda: os.path.exists(log_path), "a new file at the configured path after SIGUSR1", POLL_TIMEOUT)
    for i in range(2):
        assert ask(proxy, f"/after/{i}").status == 200
    new = wait_lines(log_path, 2)
    assert [parse(line)["request"] for line in new] == [f"GET /after/{i} HTTP/1.1" for i in range(2)], new
    old = wait_lines(rotated, 5)
    assert [parse(line)["request"] for line in old] == (
        [f"GET /before/{i} HTTP/1.1" for i in range(3)] + [f"GET /renamed/{i} HTTP/1.1" for i in range(2)]), old
    proxy.process.send_signal(signal.SIGUSR1)
    time.sleep(0.2)
    assert ask(proxy, "/again").status == 200
    assert parse(wait_lines(log_path, 3)[2])["request"] == "GET /again HTTP/1.1"
    assert len(read_lines(rotated)) == 5


def test_reload_switches_log_file(ka, start_proxy, log_path, rsp, tmp_path):
    """A reload whose config names another access_log (and the timed
    format) sends the next lines there; the lines from before the reload
    are in the first file, in the first format."""
    proxy = start_logging(start_proxy, ka, log_path)
    assert ask(proxy, "/one").status == 200
    second = str(tmp_path / "second.log")
    proxy_arguments(rsp.stage, proxy.port, [], str(tmp_path),
                    {"sites": {SITE: [ka]}, "access_log": second, "access_log_format": "timed"})
    proxy.process.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded " in proxy.stderr() or "reload failed" in proxy.stderr(), "the reload",
             POLL_TIMEOUT)
    assert "reload failed" not in proxy.stderr(), proxy.stderr()
    assert ask(proxy, "/two").status == 200
    (line,) = wait_lines(log_path, 1)
    assert parse(line)["request"] == "GET /one HTTP/1.1"
    (line,) = wait_lines(second, 1)
    assert parse(line, timed=True)["request"] == "GET /two HTTP/1.1"


def test_lines_written_at_exit(ka, start_proxy, log_path):
    """Lines still buffered when rsp stops are written before it exits: a
    request answered just before SIGTERM is in the file once rsp is gone."""
    proxy = start_logging(start_proxy, ka, log_path)
    for i in range(3):
        assert ask(proxy, f"/last/{i}").status == 200
    proxy.process.send_signal(signal.SIGTERM)
    assert proxy.wait_exit(POLL_TIMEOUT) == 0
    lines = read_lines(log_path)
    assert [parse(line)["request"] for line in lines] == [f"GET /last/{i} HTTP/1.1" for i in range(3)], lines


def test_no_access_log_by_default(ka, start_proxy, tmp_path):
    """Without access_log nothing is written: no new file appears in
    rsp's directory, and nothing like a log line on its stdout or stderr."""
    proxy = start_proxy(sites={SITE: [ka]})
    before = set(os.listdir(tmp_path))
    assert ask(proxy, "/quiet?size=1").status == 200
    time.sleep(1.5)  # longer than the log's flush interval
    assert set(os.listdir(tmp_path)) == before
    assert "/quiet?size=1" not in proxy.stderr() + proxy.stdout()


# -- stage 19: standard error, vhost_combined, json ---------------------------------------

# vhost_combined: the Host as sent (its port left out; space and what
# quotes escape written \xHH) and the port the client connected to, then
# the combined line.
VHOST_LINE = re.compile(r'^(?P<vhost>(?:[\x21\x23-\x5b\x5d-\x7e]|\\x[0-9A-Fa-f]{2})+):(?P<port>\d+) (?P<rest>.*)$')


def read_socket_until(sock, done, what):
    """Bytes read from `sock` until done(bytes so far) is true (bounded by
    POLL_TIMEOUT); fails saying `what` did not come."""
    data = b""
    deadline = time.monotonic() + POLL_TIMEOUT
    while not done(data):
        left = deadline - time.monotonic()
        assert left > 0, f"no {what} on rsp's standard error within {POLL_TIMEOUT} s; it got:\n{data.decode('latin-1')}"
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        assert chunk, f"rsp's standard error closed before {what}; it got:\n{data.decode('latin-1')}"
        data += chunk
    return data


def log_lines_in(data):
    """The access log lines among what rsp wrote on standard error (its
    own messages start with "rsp")."""
    return [line for line in data.decode("latin-1").splitlines() if LINE.match(line)]


@pytest.mark.stage(19)
@pytest.mark.parametrize("path_name,workers", [("stderr", 1), ("-", 2)])
def test_stderr_on_a_socket(ka, rsp, tmp_path, path_name, workers):
    """access_log = "stderr" (or "-") with rsp's stdout and stderr sockets,
    as under systemd (the journal's stream socket), where "/dev/stdout"
    cannot be opened: every request's line arrives on the socket whole
    (each parses; with two workers too, whose lines never interleave),
    and SIGUSR1 has nothing to reopen and changes nothing."""
    port = free_port()
    args = proxy_arguments(rsp.stage, port, [], str(tmp_path),
                           {"sites": {SITE: [ka]}, "access_log": path_name, "workers": workers})
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    process = subprocess.Popen([rsp.binary, *args], stdin=subprocess.DEVNULL, stdout=theirs, stderr=theirs,
                               cwd=str(tmp_path))
    theirs.close()
    try:
        wait_until_listening(port, process, POLL_TIMEOUT, what="rsp")
        count = 40
        for i in range(count):
            r = request(port, f"/cl?size={i}", host=SITE, headers=[("User-Agent", "a" * 300 + str(i))])
            assert r.status == 200, r
        data = read_socket_until(ours, lambda d: len(log_lines_in(d)) >= count, f"{count} access log lines")
        lines = log_lines_in(data)
        assert sorted(parse(line)["request"] for line in lines) == sorted(
            f"GET /cl?size={i} HTTP/1.1" for i in range(count)), data.decode("latin-1")
        process.send_signal(signal.SIGUSR1)
        assert request(port, "/after", host=SITE).status == 200
        data += read_socket_until(ours, lambda d: "/after" in d.decode("latin-1"), "the line after SIGUSR1")
        assert "cannot reopen" not in data.decode("latin-1"), data.decode("latin-1")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=POLL_TIMEOUT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        ours.close()


def hostile_requests(proxy):
    """Sends requests with hostile targets and headers; returns what each
    line must say: (request line, Referer, User-Agent, Host) as bytes
    (None: absent), in order."""
    agent = b'evil" 200 999 "x\\y\tz\xe9\xff\xc3\xa9 {"a":1}'
    referer = b'http://r/"q"\\'
    sent = []
    r = exchange(proxy.port, b'GET /cl?size=5&a="b"\\c HTTP/1.1\r\nHost: ' + SITE.encode() + b':' +
                 str(proxy.port).encode() + b'\r\nUser-Agent: ' + agent + b'\r\nReferer: ' + referer +
                 b'\r\nConnection: close\r\n\r\n')
    sent.append((b'GET /cl?size=5&a="b"\\c HTTP/1.1', referer, agent, SITE.encode(), r))
    r = exchange(proxy.port, b"GET /caf\xe9\x01\x1b[2J HTTP/1.1\r\nHost: " + SITE.encode() + b"\r\n\r\n")
    sent.append((b"GET /caf\xe9\x01\x1b[2J HTTP/1.1", None, None, None, r))
    r = exchange(proxy.port, b"GET /cl?size=2 HTTP/1.1\r\nHost: Odd Host\"\\\r\nConnection: close\r\n\r\n")
    sent.append((b"GET /cl?size=2 HTTP/1.1", None, None, b'Odd Host"\\', r))
    return sent


@pytest.mark.stage(19)
def test_vhost_combined_lines(ka, start_proxy, log_path):
    """access_log_format = "vhost_combined": Apache's, the Host the client
    sent (without its port; a space or quote in it escaped \\xHH) and the
    port it connected to first, then the combined line, fields escaped as
    ever; "-" when there was no Host (or no head)."""
    proxy = start_logging(start_proxy, ka, log_path, access_log_format="vhost_combined")
    sent = hostile_requests(proxy)
    lines = wait_lines(log_path, len(sent))
    for line, (request_line, referer, agent, host, r) in zip(lines, sent):
        m = VHOST_LINE.match(line)
        assert m, f"not a vhost_combined line: {line!r}"
        want_host = "-" if host is None else "".join(
            f"\\x{b:02x}" if b in (0x20, 0x22, 0x5C) or b < 0x20 or b >= 0x7F else chr(b) for b in host)
        assert hex_lower(m["vhost"]) == want_host, line
        assert int(m["port"]) == proxy.port, line
        assert_line(m["rest"], request_line, r.status, len(r.body), referer or "-", agent or "-")


@pytest.mark.stage(19)
def test_goaccess_reads_vhost_combined(ka, start_proxy, log_path, tmp_path):
    """goaccess --log-format=VCOMBINED reads every line of a vhost_combined
    log of requests for two sites, and tells the two hosts apart."""
    binary = shutil.which("goaccess")
    if binary is None:
        pytest.skip("goaccess is not installed (apt-get install goaccess; setup-env.sh installs it)")
    other = "other.test"
    proxy = start_proxy(sites={SITE: [ka], other: [ka]}, access_log=log_path, access_log_format="vhost_combined")
    count = 0
    for i in range(5):
        for host in (SITE, other, f"{SITE}:{proxy.port}"):
            r = ask(proxy, f'/cl?size={i}&q="x"', host=host, headers=[("User-Agent", f'Mozilla "q" \\ {i}')])
            assert r.status == 200, r
            count += 1
    wait_lines(log_path, count)
    out = tmp_path / "report.json"
    result = subprocess.run([binary, log_path, "--log-format=VCOMBINED", "--no-global-config", "-o", str(out)],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                            cwd=str(tmp_path))
    assert result.returncode == 0, f"goaccess failed ({result.returncode}): {result.stderr[-2000:]}"
    report = json.loads(out.read_text())
    general = report["general"]
    assert general["failed_requests"] == 0, general
    assert general["total_requests"] == count and general["valid_requests"] == count, general
    hosts = {item["data"]: item["hits"]["count"] for item in report["vhosts"]["data"]}
    assert hosts == {SITE: 10, other: 5}, hosts


@pytest.mark.stage(19)
def test_json_lines(ka, start_proxy, log_path):
    """access_log_format = "json": one JSON object a line, which Python's
    json reads; every string (target, headers, host) comes back exactly
    as the client sent its bytes when read as Latin-1 (quotes,
    backslashes, control bytes, invalid UTF-8 alike); the line itself is
    ASCII; absent fields are null; time is ISO 8601 and now."""
    proxy = start_logging(start_proxy, ka, log_path, access_log_format="json")
    sent = hostile_requests(proxy)
    lines = wait_lines(log_path, len(sent))
    for line, (request_line, referer, agent, host, r) in zip(lines, sent):
        assert line.isascii(), line
        entry = json.loads(line)

        def raw(name):
            return None if entry[name] is None else entry[name].encode("latin-1")
        assert raw("request") == request_line, line
        method, _, rest = request_line.partition(b" ")
        target, _, protocol = rest.rpartition(b" ")
        assert (raw("method"), raw("path"), raw("protocol")) == (method, target, protocol), line
        assert raw("referer") == referer and raw("user_agent") == agent, line
        assert raw("host") == host, line
        assert entry["port"] == proxy.port and entry["remote_addr"] == LOOPBACK, line
        assert entry["status"] == r.status and entry["bytes"] == len(r.body), line
        assert entry["backend"] == (f"{LOOPBACK}:{ka.port}" if r.status == 200 else None), line
        assert isinstance(entry["request_time"], float) and 0 <= entry["request_time"] < 30, line
        when = datetime.datetime.fromisoformat(entry["time"])
        now = datetime.datetime.now(datetime.timezone.utc)
        assert when.tzinfo is not None and abs((now - when).total_seconds()) < 60, line


@pytest.mark.stage(19)
def test_unknown_format_refused(rsp, tmp_path):
    """An access_log_format other than the four is refused at start, naming them."""
    port = free_port()
    args = proxy_arguments(rsp.stage, port, [], str(tmp_path),
                           {"sites": {SITE: [("127.0.0.1", 1)]}, "access_log": str(tmp_path / "a.log"),
                            "access_log_format": "apache"})
    result = subprocess.run([rsp.binary, "-t", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1, result
    assert '"combined", "timed", "vhost_combined" or "json"' in result.stderr, result.stderr
