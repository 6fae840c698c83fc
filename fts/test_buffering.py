"""Buffering (stage 17): a slow client costs the backend nothing.

A real application server with few synchronous workers (Debian's gunicorn,
`--workers 2 --worker-class sync`, running buffering_app.py) sits behind
rsp. Two clients trickling their uploads a byte at a time do not stop a
steady client from being answered (rsp reads each body whole before it
chooses a backend), and neither do two clients that read nothing of a
1 MiB page (rsp reads the response as fast as gunicorn sends it, and the
workers are free for others at once).

Bodies and responses arrive byte-exact on either side of the boundary
between memory and the temporary file (request_buffer_size,
response_buffer_size), framed by Content-Length or chunked (a chunked
request body reaches the backend as its data alone, with a
Content-Length). max_body_size answers 413 to a Content-Length too large
before the body is sent (and closes), and to a chunked body once it grows
past the limit; body_min_rate answers 408 to a body that trickles. Temporary
files are open only while they hold something (counted in /proc/PID/fd and
status.json's "buffering"), and leave nothing in temp_dir, even when rsp is
killed with SIGKILL. A temporary file that cannot grow (RLIMIT_FSIZE) loses
no byte: the exchange falls back to backpressure. A stream (text/event-
stream, X-Accel-Buffering: no) is never spooled and still streams, and
X-Accel-Buffering does not reach the client. request_buffering = false
streams a body as before. A buffered POST is retried on a fresh
connection when a pooled one turns out dead. Bad settings are config
errors naming the setting.

No timing is asserted: bounds are "did not hang" guards only.
"""

import hashlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from backends import swallower
from checks import assert_config_error
from client import Conn, Reader, connect, exchange, read_response, request, request_bytes
from netutil import LOOPBACK, free_port, wait_for, wait_until_listening
from pattern import assert_same_bytes, pattern
from promparse import value as metric_value
from proxy import large_bodies, proxy_arguments, run_rsp
from test_status import start_with_status, status_json, metrics, wait_status

pytestmark = pytest.mark.stage(17)

KiB = 1024
MiB = 1024 * KiB
GUARD = 10.0          # s: a bound on waiting for something that must happen, never a measurement
FTS = os.path.dirname(os.path.abspath(__file__))


# -- gunicorn ----------------------------------------------------------------------------------

class Gunicorn:
    """gunicorn serving buffering_app:app on 127.0.0.1:port with `workers`
    sync workers."""

    def __init__(self, tmp_path, workers=2):
        self.host, self.port, self.workers = LOOPBACK, free_port(), workers
        self.log = open(tmp_path / f"gunicorn-{self.port}.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--workers", str(workers), "--worker-class", "sync",
             "--bind", f"{LOOPBACK}:{self.port}", "--chdir", FTS, "--timeout", "60",
             "buffering_app:app"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until_listening(self.port, self.process, GUARD, what="gunicorn")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture
def gunicorn(tmp_path):
    try:
        import gunicorn as _  # noqa: F401
    except ImportError:
        pytest.fail("python3-gunicorn is not installed (setup-env.sh installs it)")
    g = Gunicorn(tmp_path)
    yield g
    g.stop()


@pytest.fixture
def temp_dir(tmp_path):
    """A temp_dir of the test's own: what is in it is this test's."""
    path = tmp_path / "spool"
    path.mkdir()
    return str(path)


def post(port, path, headers, body, timeout=GUARD * 3):
    """Sends one request with exactly these framing headers (and
    Connection: close) and reads the answer until EOF."""
    data = request_bytes("POST", path, [*headers, ("Connection", "close")], body, host=f"{LOOPBACK}:{port}")
    return exchange(port, data, timeout=timeout)


def echo_of(r):
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    return json.loads(r.body)


def all_workers_free(port, gunicorn, directory):
    """True if every gunicorn worker takes a request at once: as many
    requests as workers meet at /barrier (each waits there for the
    others, so each needs a worker of its own)."""
    os.makedirs(directory)
    results = []

    def one():
        results.append(request(port, f"/barrier?dir={directory}&n={gunicorn.workers}", timeout=GUARD * 3))

    threads = [threading.Thread(target=one) for _ in range(gunicorn.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARD * 3)
    return len(results) == gunicorn.workers and all(r.status == 200 for r in results)


def temp_fds(pid, directory):
    """The fds of process `pid` open on unlinked files of `directory`."""
    found = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith(directory + "/") and target.endswith(" (deleted)"):
            found.append(target)
    return found


def buffering_of(doc):
    """status.json's "buffering" object, checked for shape."""
    b = doc.get("buffering")
    assert isinstance(b, dict), f"status.json has no \"buffering\" object: {sorted(doc)}"
    assert set(b) == {"bodies_buffered", "spooled_bytes", "temp_files"}, b
    assert set(b["spooled_bytes"]) == {"in", "out"}, b
    return b


class Trickler(threading.Thread):
    """A client POSTing a `size`-byte body to /echo a byte every `pause` s
    until `stop` is set; then it sends the rest at once and reads the
    answer (self.response)."""

    def __init__(self, port, size, stop, pause=0.05):
        super().__init__(daemon=True)
        self.body = pattern(size)
        self.sock = connect(port, timeout=GUARD * 3)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = (f"POST /echo HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\nContent-Length: {size}\r\n"
                f"Connection: close\r\n\r\n").encode()
        self.sock.sendall(head)
        self.stop, self.pause, self.sent, self.response, self.error = stop, pause, 0, None, None

    def run(self):
        try:
            while not self.stop.is_set() and self.sent < len(self.body) - 1:
                self.sock.sendall(self.body[self.sent:self.sent + 1])
                self.sent += 1
                self.stop.wait(self.pause)
            self.sock.sendall(self.body[self.sent:])
        except OSError as e:
            self.error = e  # answered and closed before the end: the answer is still there
        try:
            self.response = read_response(self.sock)
        except OSError as e:
            self.error = e
        finally:
            self.sock.close()


# -- the story: slow clients and an application server --------------------------------------------

def test_slow_uploaders_do_not_hold_the_workers(gunicorn, start_proxy):
    """Two clients trickle a 1,000-byte body a byte at a time to a
    gunicorn with two sync workers; meanwhile a steady client's five
    requests are all answered (through stage 16 each uploader holds a
    worker until its last byte, and the steady client waits). Then the
    uploaders send the rest: both bodies reach gunicorn exact."""
    proxy = start_proxy(gunicorn)
    stop = threading.Event()
    uploaders = [Trickler(proxy.port, 1000, stop) for _ in range(2)]
    for u in uploaders:
        u.start()
    try:
        wait_for(lambda: all(u.sent >= 5 for u in uploaders), "the uploaders began trickling", GUARD)
        for i in range(5):
            r = request(proxy.port, "/pid", timeout=GUARD)
            assert r.status == 200, f"the steady client's request {i}: {r!r}"
        assert all(u.sent < 1000 for u in uploaders), "an upload ended before the steady client was served"
    finally:
        stop.set()
        for u in uploaders:
            u.join(GUARD * 3)
    for u in uploaders:
        assert u.error is None, f"an uploader failed: {u.error!r}"
        doc = echo_of(u.response)
        assert doc["length"] == 1000 and doc["sha256"] == hashlib.sha256(u.body).hexdigest(), doc


def test_slow_readers_do_not_hold_the_workers(gunicorn, start_proxy, temp_dir, tmp_path):
    """Two clients ask for a 32 MiB page and read nothing of it (a page
    larger than every kernel buffer between gunicorn and the client: with
    1 MiB, those would hide the problem here); meanwhile a steady client
    is answered, and both of gunicorn's workers take a request at once
    (each is free again: rsp took the whole page; through stage 16 each
    waits for its slow reader). Then the slow readers read: every byte
    arrives, in order."""
    proxy = start_with_status(start_proxy, gunicorn, temp_dir=temp_dir)
    n = 32 * MiB
    slow = []
    for _ in range(2):
        sock = connect(proxy.port, rcvbuf=4 * KiB, timeout=GUARD * 3)
        sock.sendall(f"GET /bytes?n={n} HTTP/1.1\r\nHost: {LOOPBACK}\r\nConnection: close\r\n\r\n".encode())
        slow.append(sock)
    try:
        wait_status(proxy, lambda d: d["bytes"]["out"] >= 2 * n // 16 or
                    buffering_of(d)["spooled_bytes"]["out"] >= 2 * (n - 8 * MiB), "both pages on their way", GUARD)
        for i in range(5):
            r = request(proxy.port, "/pid", timeout=GUARD)
            assert r.status == 200, f"the steady client's request {i}: {r!r}"
        assert all_workers_free(proxy.port, gunicorn, str(tmp_path / "barrier")), \
            "the workers could not all take a request: some are still held by the slow readers"
        for sock in slow:
            r = read_response(sock)
            assert r.status == 200 and int(r.header("Content-Length")) == n, r
            assert_same_bytes(r.body, pattern(n), "the slow reader's page")
    finally:
        for sock in slow:
            sock.close()


# -- byte for byte across memory and file --------------------------------------------------------

REQUEST_BUFFER = 4096
BODY_SIZES = [1, REQUEST_BUFFER - 1, REQUEST_BUFFER, REQUEST_BUFFER + 1, 3 * MiB + 7]


def chunked_body(data, size=1000):
    out = [f"{len(data[i:i + size]):x};x=1\r\n".encode() + data[i:i + size] + b"\r\n"
           for i in range(0, len(data), size)]
    return b"".join(out) + b"0\r\nX-Trailer: t\r\n\r\n"


@pytest.mark.parametrize("framing", ["length", "chunked"])
@pytest.mark.parametrize("size", BODY_SIZES, ids=[str(s) for s in BODY_SIZES])
def test_request_bodies_exact_across_the_boundary(gunicorn, start_proxy, stage, temp_dir, framing, size):
    """With request_buffer_size = 4096, bodies of 1 byte, 4095, 4096,
    4097 and 3 MiB + 7 bytes, framed by Content-Length or chunked, reach
    gunicorn exact, always with a Content-Length (no Transfer-Encoding);
    status.json counts each body buffered, and bytes written to a
    temporary file only for bodies over the limit (by their data: a
    chunked body's framing does not count)."""
    proxy = start_with_status(start_proxy, gunicorn, request_buffer_size=REQUEST_BUFFER, temp_dir=temp_dir,
                              **large_bodies(stage))
    data = pattern(size, offset=3)
    if framing == "chunked":
        headers, body = [("Transfer-Encoding", "chunked")], chunked_body(data)
    else:
        headers, body = [("Content-Length", str(size))], data
    doc = echo_of(post(proxy.port, "/echo", headers, body))
    assert doc["length"] == size and doc["sha256"] == hashlib.sha256(data).hexdigest(), doc
    assert doc["content_length"] == str(size) and doc["transfer_encoding"] is None, doc
    b = buffering_of(wait_status(proxy, lambda d: d["requests_total"] >= 1, "the request counted"))
    assert b["bodies_buffered"] == 1, b
    if size > REQUEST_BUFFER:
        assert 0 < b["spooled_bytes"]["in"] <= size, b
    else:
        assert b["spooled_bytes"]["in"] == 0, b
    assert b["temp_files"] == 0, b
    assert temp_fds(proxy.pid, temp_dir) == []


RESPONSE_BUFFER = 16 * KiB
RESPONSE_SIZES = [RESPONSE_BUFFER - 1, RESPONSE_BUFFER, RESPONSE_BUFFER + 1, 16 * MiB + 3]


@pytest.mark.parametrize("splice", [True, False], ids=["splice-on", "splice-off"])
@pytest.mark.parametrize("size", RESPONSE_SIZES, ids=[str(s) for s in RESPONSE_SIZES])
def test_responses_exact_across_the_boundary(gunicorn, start_proxy, temp_dir, tmp_path, size, splice):
    """With response_buffer_size = 16 KiB, responses of 16 KiB - 1, 16
    KiB, 16 KiB + 1 and 16 MiB + 3 bytes to a client that reads nothing
    until gunicorn has sent everything (all its workers take a request
    at once) arrive exact, splice
    on or off; the 16 MiB one (more than the kernel's buffers hold) went
    through a temporary file (spooled
    bytes.out > 0), which is closed once it is out."""
    g = gunicorn
    proxy = start_with_status(start_proxy, g, response_buffer_size=RESPONSE_BUFFER, temp_dir=temp_dir,
                              splice=splice)
    with connect(proxy.port, rcvbuf=4 * KiB, timeout=GUARD * 3) as sock:
        sock.sendall(f"GET /bytes?n={size} HTTP/1.1\r\nHost: {LOOPBACK}\r\nConnection: close\r\n\r\n".encode())
        # While the client reads nothing, gunicorn is done with the page.
        assert all_workers_free(proxy.port, g, str(tmp_path / "barrier")), "a worker is still held"
        if size > MiB:
            b = buffering_of(wait_status(proxy, lambda d: buffering_of(d)["spooled_bytes"]["out"] > 0,
                                         "part of the page written to a temporary file"))
            assert b["temp_files"] == 1, b
            assert len(temp_fds(proxy.pid, temp_dir)) == 1
        r = read_response(sock)
    assert r.status == 200 and int(r.header("Content-Length")) == size, r
    assert_same_bytes(r.body, pattern(size), "the page")
    wait_status(proxy, lambda d: buffering_of(d)["temp_files"] == 0, "the temporary file closed")
    assert temp_fds(proxy.pid, temp_dir) == []


def test_keepalive_responses_in_order_after_a_spooled_one(gunicorn, start_proxy, temp_dir):
    """On one keep-alive connection, a 16 MiB page the client does not read
    at once (it is spooled), then two pipelined requests: the answers
    come in order, each exact, and the temporary file is closed after."""
    proxy = start_with_status(start_proxy, gunicorn, response_buffer_size=RESPONSE_BUFFER, temp_dir=temp_dir)
    with Conn(proxy.port, timeout=GUARD * 3) as c:
        c.send(c.request_bytes("GET", f"/bytes?n={16 * MiB}") + c.request_bytes("GET", "/bytes?n=5") +
               c.request_bytes("GET", "/bytes?n=70000"))
        wait_status(proxy, lambda d: buffering_of(d)["spooled_bytes"]["out"] > 0, "the page spooled")
        for n in (16 * MiB, 5, 70000):
            r = c.read_response()
            assert r.status == 200 and len(r.body) == n, r
            assert_same_bytes(r.body, pattern(n), f"the {n}-byte page")
    wait_status(proxy, lambda d: buffering_of(d)["temp_files"] == 0, "the temporary file closed")


# -- limits -------------------------------------------------------------------------------------

def test_content_length_over_max_body_size_refused_up_front(gunicorn, start_proxy):
    """max_body_size = 10000: a POST announcing 10001 bytes gets 413 with
    Connection: close before it sends a byte of its body, and gunicorn
    never hears of it; one of 10000 bytes passes."""
    proxy = start_with_status(start_proxy, gunicorn, max_body_size=10000)
    with connect(proxy.port, timeout=GUARD) as sock:
        sock.sendall(f"POST /echo HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Length: 10001\r\n\r\n".encode())
        r = read_response(sock)
    assert r.status == 413, r
    assert r.header("Connection") == "close", r.headers
    doc = echo_of(request(proxy.port, "/echo", method="POST", body=pattern(10000)))
    assert doc["length"] == 10000
    b = buffering_of(wait_status(proxy, lambda d: d["requests_total"] >= 2, "both requests counted"))
    assert b["bodies_buffered"] == 1, b


def test_chunked_body_growing_past_max_body_size(gunicorn, start_proxy):
    """max_body_size = 10000: a chunked body is refused with 413 once its
    data passes 10000 bytes, and gunicorn never hears of it."""
    proxy = start_with_status(start_proxy, gunicorn, max_body_size=10000)
    r = post(proxy.port, "/echo", [("Transfer-Encoding", "chunked")], chunked_body(pattern(20000)))
    assert r.status == 413, r
    doc = wait_status(proxy, lambda d: d["requests_total"] >= 1, "the request counted")
    assert buffering_of(doc)["bodies_buffered"] == 0


def test_streamed_chunked_body_growing_past_max_body_size(make_raw_backend, start_proxy):
    """With request_buffering = false and max_body_size = 10000, a chunked
    body of 300,000 bytes streamed to the backend is cut off with a 413
    once it passes 10000 bytes: the backend got no more than that, beyond
    what came with the head (the first read, up to 64 KiB)."""
    got = []
    raw = make_raw_backend(swallower(got, GUARD))
    proxy = start_proxy(raw, request_buffering=False, max_body_size=10000)
    r = post(proxy.port, "/echo", [("Transfer-Encoding", "chunked")], chunked_body(pattern(300000)))
    assert r.status == 413, r
    wait_for(lambda: raw.connections == 1, "the backend connection", GUARD)
    assert sum(got) < 10000 + 64 * KiB + 1000, f"the backend got {sum(got)} bytes"


def test_full_temp_file_for_a_request_body(gunicorn, start_proxy, temp_dir):
    """rsp may write files of at most 64 KiB (RLIMIT_FSIZE): an upload of
    1 MiB, over request_buffer_size, cannot be kept and is answered 500
    (logged), with nothing at gunicorn; rsp then serves on, and a body
    that fits in memory still passes."""
    proxy = start_proxy(gunicorn, temp_dir=temp_dir, request_buffer_size=4096)
    resource.prlimit(proxy.pid, resource.RLIMIT_FSIZE, (64 * KiB, 64 * KiB))
    r = post(proxy.port, "/echo", [("Content-Length", str(MiB))], pattern(MiB))
    assert r.status == 500, r
    wait_for(lambda: "temp_dir" in proxy.stderr(), "the problem logged", GUARD)
    assert temp_fds(proxy.pid, temp_dir) == []
    doc = echo_of(post(proxy.port, "/echo", [("Content-Length", "100")], pattern(100)))
    assert doc["length"] == 100


def test_body_under_min_rate_gets_408(gunicorn, start_proxy):
    """body_min_rate = 200 bytes/s with body_timeout = 1 (the grace): a
    body that comes at a few bytes a second, never pausing as long as
    body_timeout, is answered 408; gunicorn never hears of it, and the
    timeout is logged naming body_min_rate."""
    proxy = start_with_status(start_proxy, gunicorn, body_min_rate=200, body_timeout=1)
    stop = threading.Event()
    t = Trickler(proxy.port, 1000, stop, pause=0.1)
    t.start()
    t.join(GUARD)
    stop.set()
    t.join(GUARD)
    assert t.response is not None, f"no answer to the trickling body: {t.error!r}"
    assert t.response.status == 408, t.response
    assert t.sent < 1000, "the body was sent whole before the 408"
    wait_for(lambda: "body_min_rate" in proxy.stderr(), "the timeout logged", GUARD)


@pytest.mark.parametrize("data, status", [
    (b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", (400, 413)),
    (b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", (400, 413)),
    (b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", (400,)),
    (b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n", (400,)),
    (b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", (400,)),
    (b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 17 + b"\r\nx\r\n", (400,)),
], ids=["length-2^63", "length-huge", "length-negative", "chunk-negative", "chunk-0x", "chunk-overflow"])
def test_hostile_lengths_still_refused(gunicorn, start_proxy, temp_dir, data, status):
    """With buffering on, a Content-Length of 2^63 or more, a negative one,
    and negative, odd or overflowing chunk sizes are refused (400, or 413
    for a length over max_body_size), nothing reaches gunicorn, and no
    temporary file is left open."""
    proxy = start_with_status(start_proxy, gunicorn, temp_dir=temp_dir, max_body_size=0)
    r = exchange(proxy.port, data)
    assert r.status in status, r
    assert temp_fds(proxy.pid, temp_dir) == []
    assert os.listdir(temp_dir) == []


# -- temporary files ------------------------------------------------------------------------------

def test_temp_files_leave_nothing_after_sigkill(gunicorn, rsp, tmp_path, temp_dir):
    """rsp holds a spooled response (a client reading nothing of 8 MiB)
    and a request body in a file (an upload of 1 MiB of 4 MiB so far):
    two temporary files open, in temp_dir, yet temp_dir lists nothing
    (O_TMPFILE, or unlinked at once). kill -9 rsp: still nothing in
    temp_dir."""
    port = free_port()
    args = proxy_arguments(rsp.stage, port, [(gunicorn.host, gunicorn.port)], str(tmp_path),
                           {"temp_dir": temp_dir, "request_buffer_size": 4096, **large_bodies(rsp.stage)})
    with open(tmp_path / "rsp-killed.stderr", "w") as err:
        process = subprocess.Popen([rsp.binary, *args], stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    try:
        wait_until_listening(port, process, GUARD, what="rsp")
        reader = connect(port, rcvbuf=4 * KiB, timeout=GUARD)
        reader.sendall(f"GET /bytes?n={8 * MiB} HTTP/1.1\r\nHost: {LOOPBACK}\r\n\r\n".encode())
        uploader = connect(port, timeout=GUARD)
        uploader.sendall(f"POST /echo HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Length: {4 * MiB}\r\n\r\n".encode()
                         + pattern(MiB))
        wait_for(lambda: len(temp_fds(process.pid, temp_dir)) == 2, "two temporary files open", GUARD)
        assert os.listdir(temp_dir) == [], "a temporary file has a name in temp_dir"
        process.send_signal(signal.SIGKILL)
        process.wait(GUARD)
        reader.close()
        uploader.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert os.listdir(temp_dir) == [], "rsp killed left files in temp_dir"


def test_full_temp_file_loses_nothing(gunicorn, start_proxy, temp_dir):
    """rsp may write files of at most 64 KiB (RLIMIT_FSIZE, set with
    prlimit on the running rsp): a 16 MiB response to a client reading
    nothing fills its temporary file, then waits in gunicorn
    (backpressure) instead; once the client reads, every byte arrives in
    order, the problem is logged once, and rsp serves on."""
    proxy = start_with_status(start_proxy, gunicorn, temp_dir=temp_dir, response_buffer_size=RESPONSE_BUFFER)
    resource.prlimit(proxy.pid, resource.RLIMIT_FSIZE, (64 * KiB, 64 * KiB))
    n = 16 * MiB
    for _ in range(2):
        with connect(proxy.port, rcvbuf=4 * KiB, timeout=GUARD * 3) as sock:
            sock.sendall(f"GET /bytes?n={n} HTTP/1.1\r\nHost: {LOOPBACK}\r\nConnection: close\r\n\r\n".encode())
            wait_status(proxy, lambda d: buffering_of(d)["spooled_bytes"]["out"] > 0, "the file used")
            r = read_response(sock)
        assert r.status == 200 and int(r.header("Content-Length")) == n, r
        assert_same_bytes(r.body, pattern(n), "the page through a full temporary file")
    lines = [line for line in proxy.stderr().splitlines() if "temp_dir" in line]
    assert len(lines) == 1, f"expected the problem logged once: {lines}"
    assert request(proxy.port, "/pid", timeout=GUARD).status == 200


# -- what must stream --------------------------------------------------------------------------------

@pytest.mark.parametrize("path, content_type", [
    ("/events", "text/event-stream"), ("/stream?accel=no", "text/plain")], ids=["event-stream", "x-accel-no"])
def test_streams_still_stream(gunicorn, start_proxy, tmp_path, path, content_type):
    """A text/event-stream response, and one with X-Accel-Buffering: no:
    the client gets the first event while gunicorn waits to send the
    second (it sends it once the test has seen the first), and
    X-Accel-Buffering does not reach the client."""
    proxy = start_proxy(gunicorn)
    flag = tmp_path / f"flag-{path.strip('/').split('?')[0]}"
    sep = "&" if "?" in path else "?"
    with connect(proxy.port, timeout=GUARD) as sock:
        sock.sendall(f"GET {path}{sep}flag={flag} HTTP/1.1\r\nHost: {LOOPBACK}\r\nConnection: close\r\n\r\n"
                     .encode())
        reader = Reader(sock)
        head = reader.until(b"\r\n\r\n", "the stream's head")
        assert content_type.encode() in head, head
        assert b"x-accel-buffering" not in head.lower(), head
        reader.until(b"data: one\n\n", "the first event, before the backend sends the second")
        flag.write_text("go")
        rest = reader.to_eof("the rest of the stream")
    assert b"data: two\n\n" in rest, rest


def test_streams_never_spooled(gunicorn, start_proxy, temp_dir):
    """A 4 MiB response with X-Accel-Buffering: no, to a client reading
    nothing: nothing of it is written to a temporary file (the backend
    waits, as before stage 17); then every byte arrives."""
    proxy = start_with_status(start_proxy, gunicorn, temp_dir=temp_dir, response_buffer_size=RESPONSE_BUFFER)
    n = 4 * MiB
    with connect(proxy.port, rcvbuf=4 * KiB, timeout=GUARD * 3) as sock:
        sock.sendall(f"GET /bytes?n={n}&accel=no HTTP/1.1\r\nHost: {LOOPBACK}\r\nConnection: close\r\n\r\n"
                     .encode())
        wait_status(proxy, lambda d: d["requests_in_flight"] >= 1, "the request under way")
        r_other = request(proxy.port, "/pid", timeout=GUARD)  # the other worker
        assert r_other.status == 200
        doc = status_json(proxy)
        assert buffering_of(doc)["spooled_bytes"]["out"] == 0, buffering_of(doc)
        assert temp_fds(proxy.pid, temp_dir) == []
        r = read_response(sock)
    assert r.status == 200 and r.header("X-Accel-Buffering") is None, r.headers
    assert_same_bytes(r.body, pattern(n), "the unbuffered page")


# -- request_buffering = false, 100-continue, retries ---------------------------------------------

@pytest.mark.parametrize("buffering", [True, False], ids=["buffered", "streamed"])
def test_backend_chosen_after_the_body_unless_streamed(make_raw_backend, start_proxy, buffering):
    """A POST missing the last byte of its body: with request_buffering on
    (the default) no backend connection opens; with request_buffering =
    false the head goes to the backend at once, as before stage 17."""
    heads = []

    def record_head(conn, backend):
        """Records the head, reads the body its Content-Length announces,
        answers "ok"."""
        conn.settimeout(GUARD)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                piece = conn.recv(4096)
                if not piece:
                    return
                data += piece
            head, _, body = data.partition(b"\r\n\r\n")
            heads.append(head)
            fields = head.lower().split(b"content-length:")
            length = int(fields[1].split(b"\r\n")[0]) if len(fields) > 1 else 0
            while len(body) < length:
                piece = conn.recv(4096)
                if not piece:
                    return
                body += piece
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        except OSError:
            return

    raw = make_raw_backend(record_head)
    options = {} if buffering else {"request_buffering": False}
    proxy = start_proxy(raw, **options)
    with connect(proxy.port, timeout=GUARD) as sock:
        sock.sendall(f"POST /up HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhell"
                     .encode())
        if buffering:
            # A request sent after it, on another connection, reaches the
            # backend; by then the POST's connection would have been
            # accepted before it, had rsp opened one.
            r = request(proxy.port, "/probe", timeout=GUARD)
            assert r.status == 200, r
            assert raw.connections == 1 and heads[0].startswith(b"GET /probe "), \
                f"the backend heard of the POST before its body was in: {heads}"
        else:
            wait_for(lambda: any(h.startswith(b"POST /up ") for h in heads), "the POST head at the backend", GUARD)
        sock.sendall(b"o")
        r = read_response(sock)
    assert r.status == 200 and r.body == b"ok", r


def test_expect_continue_answered_by_rsp(gunicorn, start_proxy):
    """A client sending Expect: 100-continue gets "100 Continue" from rsp
    before it sends its body (rsp is ready to read it); gunicorn gets the
    whole body with a Content-Length, and no Expect."""
    proxy = start_proxy(gunicorn)
    body = pattern(3000)
    with connect(proxy.port, timeout=GUARD) as sock:
        sock.sendall(f"POST /echo HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Length: {len(body)}\r\n"
                     f"Expect: 100-continue\r\nConnection: close\r\n\r\n".encode())
        reader = Reader(sock)
        interim = reader.until(b"\r\n\r\n", "the 100 Continue")
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n"), interim
        sock.sendall(body)
        rest = reader.to_eof("the final answer")
    head, _, payload = rest.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), rest[:300]
    doc = json.loads(payload)
    assert doc["length"] == len(body) and doc["expect"] is None, doc


def test_buffered_post_retried_on_a_dead_pooled_connection(make_keepalive_backend, start_proxy):
    """The backend closes a pooled connection as a POST arrives on it (the
    pooling race): the body was buffered whole, so rsp sends the request
    again on a new connection, and the client gets the answer (a
    streamed body is never sent twice: test_pooling.py)."""
    ka = make_keepalive_backend("ka", drop_reused=("POST",))
    proxy = start_proxy(ka)
    with Conn(proxy.port) as c:
        assert c.get("/echo").status == 200  # leaves an idle pooled connection
    wait_for(lambda: ka.connections >= 1, "the first request", GUARD)
    body = pattern(100 * KiB)
    with Conn(proxy.port, timeout=GUARD) as c:
        r = c.request("POST", "/echo", headers=[("Content-Length", str(len(body)))], body=body)
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    tries = ka.requests_for("/echo")
    posts = [t for t in tries if t.method == "POST"]
    assert len(posts) == 2 and posts[0].dropped and not posts[1].dropped, posts
    assert posts[1].body == body


# -- counters -----------------------------------------------------------------------------------------

def test_metrics_count_buffering(gunicorn, start_proxy, temp_dir):
    """/metrics has rsp_bodies_buffered_total, rsp_spooled_bytes_total
    {direction="in"|"out"} and rsp_temp_files, agreeing with status.json."""
    proxy = start_with_status(start_proxy, gunicorn, temp_dir=temp_dir, request_buffer_size=4096)
    echo_of(request(proxy.port, "/echo", method="POST", body=pattern(10000)))
    doc = wait_status(proxy, lambda d: d["requests_total"] >= 1, "the request counted")
    families = metrics(proxy)
    b = buffering_of(doc)
    assert b["bodies_buffered"] == 1 and b["spooled_bytes"]["in"] > 0, b
    assert metric_value(families, "rsp_bodies_buffered_total") == b["bodies_buffered"]
    assert metric_value(families, "rsp_spooled_bytes_total", direction="in") == b["spooled_bytes"]["in"]
    assert metric_value(families, "rsp_spooled_bytes_total", direction="out") == b["spooled_bytes"]["out"]
    assert metric_value(families, "rsp_temp_files") == b["temp_files"] == 0


# -- the settings --------------------------------------------------------------------------------------

B = (LOOPBACK, 1)
LISTEN_PORT = 18080

BAD = [
    ("request_buffering", "yes"), ("response_buffering", 1),
    ("request_buffer_size", -1), ("request_buffer_size", "12q"), ("request_buffer_size", 1.5),
    ("response_buffer_size", 100), ("max_body_size", "lots"), ("max_temp_file_size", [1]),
    ("body_min_rate", -1), ("body_min_rate", "fast"),
    ("temp_dir", "/nonexistent/rsp-tmp"), ("temp_dir", "relative/dir"), ("temp_dir", 5),
    ("temp_dir", "/etc/hostname"),
]


@pytest.mark.parametrize("name, value", BAD, ids=[f"{n}-{v}" for n, v in BAD])
def test_bad_buffering_settings(rsp, tmp_path, name, value):
    """A wrong buffering setting makes rsp -t exit 1 with one line naming
    the file and the setting."""
    (path,) = proxy_arguments(rsp.stage, LISTEN_PORT, [B], str(tmp_path), {name: value})
    line = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, status=1)
    assert name in line.replace(path, ""), f"the error does not name {name}: {line!r}"


GOOD = [("request_buffer_size", "64k"), ("max_body_size", "1g"), ("max_body_size", 0),
        ("response_buffer_size", "1M"), ("max_temp_file_size", 0), ("body_min_rate", 0.5),
        ("temp_dir", "/tmp"), ("request_buffering", False), ("response_buffering", False)]


@pytest.mark.parametrize("name, value", GOOD, ids=[f"{n}-{v}" for n, v in GOOD])
def test_good_buffering_settings(rsp, tmp_path, name, value):
    """Sizes as numbers or with k/m/g, 0 where it means "no limit" or
    "no file", a temp_dir that is a writable directory: rsp -t says ok."""
    (path,) = proxy_arguments(rsp.stage, LISTEN_PORT, [B], str(tmp_path), {name: value})
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
