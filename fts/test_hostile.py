"""Hostile clients: connections that send nothing, heads trickled a byte at
a time, a flood of connects and closes, a huge body for a backend that
never reads it, and (stage 06 on) garbage and oversized heads. Until
stage 08 adds timeouts the proxy may keep such clients as long as they
like; what it must do is go on serving everybody else, keep its memory
bounded, and give back every file descriptor once they are gone (the
teardown check counts them).

Counts are fixed; pauses only set a situation up (a trickle's pace, a
sender seen to be blocked); nothing is timed.
"""

import functools
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends import record_request
from checks import assert_serves, skip_without_fds, wait_idle
from client import build_request, connect, get, leave_early, read_to_eof, Response
import netutil
from proxy import count_fds, raised_fd_limit, streamed, vm_rss

KiB = 1024
MiB = 1024 * KiB

POLL_TIMEOUT = 30.0      # s; a bound on waiting for something that must happen, not a measurement
RSS_GROWTH_LIMIT = 8 * MiB

SILENT_CLIENTS = 1000
FDS_NEEDED = 2100        # up to stage 05 the proxy holds 2 fds per silent client (and its backend)
FDS_WANTED = 4096

TRICKLERS = 50
TRICKLE_PAUSE = 0.2      # s between two bytes of each trickled head

FLOOD_THREADS = 5
FLOOD_CYCLES = 1000      # per thread

HUGE_BODY = 256 * MiB
STALL = 1.0              # s without progress after which the sender counts as blocked

DROPS = "a write that would block (EAGAIN) or is short drops the bytes not written"


# -- helpers -------------------------------------------------------------------


wait_for = functools.partial(netutil.wait_for, timeout=POLL_TIMEOUT)


def assert_serves_page(proxy, static_site):
    """The proxy answers a normal request (from nginx serving static_site)."""
    _, files = static_site
    r = get(proxy.port, "/index.html")
    assert r.status == 200, f"a normal request failed: {r!r} {r.raw[:200]!r}"
    assert r.body == files["index.html"], f"a normal request got {r.body[:200]!r}"


def serve_some(proxy, count, threads, static_site=None):
    """`count` normal requests, `threads` at a time, each answered in full
    (from nginx if static_site is given, else from the HTTP test backend)."""
    if static_site is None:
        def one(i):
            assert_serves(proxy, 1000 + i)
    else:
        def one(i):
            assert_serves_page(proxy, static_site)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(count)))


@pytest.fixture(scope="module", autouse=True)
def many_fds():
    """Raises this process's soft RLIMIT_NOFILE to FDS_WANTED (or the hard
    limit) for this module, and puts it back afterwards. Autouse and
    module-scoped, so that it comes before every process the tests start
    (the proxy, and nginx of the module-scoped fixture), which inherit the
    limit from Popen. A test that needs FDS_NEEDED checks the result."""
    with raised_fd_limit(FDS_WANTED):
        yield


# -- clients that send nothing ---------------------------------------------------

@pytest.mark.stage(2)
def test_1000_silent_connections_do_not_stop_service(nginx, static_site, start_proxy):
    """1,000 connections that send nothing (from stage 06 they sit in the
    HEAD phase; before that each also holds a connection to the backend,
    nginx here, as the Python test backend accepts too slowly for such a
    burst): once the proxy has accepted all of them, 20 normal requests are
    served in full; then the silent ones close, and the proxy gives back
    every fd."""
    skip_without_fds(FDS_NEEDED)
    proxy = start_proxy(nginx)
    silent = []
    try:
        for _ in range(SILENT_CLIENTS):
            silent.append(connect(proxy.port))
        wait_for(lambda: count_fds(proxy.pid) >= proxy.baseline_fds + SILENT_CLIENTS,
                 f"the proxy holding the {SILENT_CLIENTS} silent connections")
        serve_some(proxy, 20, 10, static_site)
    finally:
        for sock in silent:
            sock.close()
    assert_serves_page(proxy, static_site)
    wait_idle(proxy)


# -- heads trickled a byte at a time ---------------------------------------------------

@pytest.mark.stage(2)
def test_trickled_heads_do_not_stop_service(backend, start_proxy):
    """50 clients each send a request head one byte at a time, a byte per
    client every 0.2 s, all from one thread; at four points of the trickle
    10 normal requests are served in full. Once its last byte is sent,
    each trickled request gets its own answer (from stage 06 the proxy
    parses the head as it trickles in; before, it relays the bytes and the
    backend does)."""
    proxy = start_proxy(backend)
    heads = [f"GET /echo?client={i:02d} HTTP/1.0\r\nHost: h\r\n\r\n".encode() for i in range(TRICKLERS)]
    length = len(heads[0])
    checkpoints = {3: threading.Event(), length // 3: threading.Event(),
                   2 * length // 3: threading.Event(), length - 1: threading.Event()}
    served = {k: threading.Event() for k in checkpoints}
    failure = []
    socks = [connect(proxy.port) for _ in range(TRICKLERS)]

    def trickle():
        try:
            for sock in socks:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for k in range(length):
                if k in checkpoints:  # every head is k bytes in: let normal requests through
                    checkpoints[k].set()
                    if not served[k].wait(POLL_TIMEOUT):
                        return
                for sock, head in zip(socks, heads):
                    sock.sendall(head[k:k + 1])
                time.sleep(TRICKLE_PAUSE)
        except BaseException as e:  # reported by the main thread
            failure.append(e)
            for event in checkpoints.values():
                event.set()

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        for k in sorted(checkpoints):
            assert checkpoints[k].wait(POLL_TIMEOUT), f"the trickle never got {k} bytes in"
            assert not failure, f"trickling failed: {failure[0]!r}"
            serve_some(proxy, 10, 5)
            served[k].set()
        sender.join(POLL_TIMEOUT)
        assert not sender.is_alive(), "the trickle never finished"
        assert not failure, f"trickling failed: {failure[0]!r}"
        for i, sock in enumerate(socks):
            raw, reset = read_to_eof(sock)
            r = Response(raw, reset)
            assert r.status == 200, f"trickled client {i}: {r!r} {raw[:200]!r}"
            assert r.json()["path"] == f"/echo?client={i:02d}", f"trickled client {i} got {r.json()['path']}"
    finally:
        for event in served.values():
            event.set()
        for sock in socks:
            sock.close()


# -- a flood of connects and closes -----------------------------------------------

@pytest.mark.stage(2)
def test_connect_close_flood(nginx, static_site, start_proxy):
    """5,000 connections from 5 threads at once, each closed at once or
    after half a request, with a FIN or with a RST (SO_LINGER 0): the
    proxy survives, serves the next request in full, and goes back to its
    startup fd count. The backend is nginx: up to stage 05 every client
    makes a backend connection, and the Python test backend cannot accept
    them as fast (then stages 02-04, whose connect blocks, would freeze
    for the kernel's SYN retries: chapter 05's subject, not this test's)."""
    proxy = start_proxy(nginx)
    half_request = build_request(proxy.port, "GET", "/index.html")
    half_request = half_request[:len(half_request) // 2]

    def flood(first):
        for i in range(first, first + FLOOD_CYCLES):
            leave_early(proxy.port, i, half_request)

    with ThreadPoolExecutor(FLOOD_THREADS) as pool:
        list(pool.map(flood, range(0, FLOOD_THREADS * FLOOD_CYCLES, FLOOD_CYCLES)))
    assert proxy.alive(), "the proxy died"
    assert_serves_page(proxy, static_site)
    wait_idle(proxy)


# -- a huge body for a backend that never reads -------------------------------------------

def first_holds_then_records(release):
    """A raw backend handler: the first connection is accepted and never
    read (held until `release` is set, then closed with its data unread);
    every later one is answered by record_request."""
    lock = threading.Lock()
    seen = [0]

    def handle(conn, backend):
        with lock:
            first = seen[0] == 0
            seen[0] += 1
        if first:
            release.wait(POLL_TIMEOUT * 2)
        else:
            record_request(conn, backend)
    return handle


@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, DROPS + ": the body goes nowhere instead of blocking its sender")
def test_huge_body_to_backend_that_never_reads(make_raw_backend, start_proxy, stage):
    """A client POSTs a 256 MiB body to a backend that accepts and never
    reads. Its sending blocks (backpressure reaches it) with the proxy's
    RSS less than 8 MiB above where it started; meanwhile (stage 02 on)
    a normal request is served. The client then gives up and closes, the
    backend lets go of its connection, and the proxy serves the next
    request and gives back every fd.

    The backend is released on purpose: a client paused by backpressure
    is out of epoll (stages 04-06), so the proxy need not notice it leave,
    even with a RST, and may hold the pair until the backend moves; until
    timeouts arrive (chapter 08) nothing else would free it.

    From stage 17 the body is streamed only with request_buffering =
    false (and without a limit, max_body_size = 0); buffered, it would go
    to a temporary file up to max_body_size (test_buffering.py)."""
    release = threading.Event()
    recorder = make_raw_backend(first_holds_then_records(release))
    proxy = start_proxy(recorder, **streamed(stage), **({"max_body_size": 0} if stage >= 17 else {}))
    before = vm_rss(proxy.pid)
    sent = [0]
    failure = []
    sock = connect(proxy.port)

    def send():
        head = (f"POST /upload HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
                f"Content-Length: {HUGE_BODY}\r\nConnection: close\r\n\r\n").encode()
        chunk = bytes(64 * KiB)
        try:
            sock.sendall(head)
            while sent[0] < HUGE_BODY:
                sock.sendall(chunk)
                sent[0] += len(chunk)
        except OSError as e:
            failure.append(e)

    sender = threading.Thread(target=send, daemon=True)
    try:
        sender.start()
        # Blocked: no progress for STALL seconds (or finished: everything sent).
        last, last_change = -1, time.monotonic()
        deadline = time.monotonic() + POLL_TIMEOUT
        highest = 0
        while sender.is_alive() and time.monotonic() < deadline:
            highest = max(highest, vm_rss(proxy.pid))
            if sent[0] != last:
                last, last_change = sent[0], time.monotonic()
            elif time.monotonic() - last_change > STALL:
                break
            time.sleep(0.05)
        assert not failure, f"sending failed after {sent[0]} bytes: {failure[0]!r}"
        assert sent[0] < HUGE_BODY, (
            f"all {HUGE_BODY // MiB} MiB were taken from the client although the backend reads "
            f"nothing: the proxy dropped or stored them")
        assert sender.is_alive(), f"the sender neither finished nor blocked within {POLL_TIMEOUT} s"
        for _ in range(8):
            highest = max(highest, vm_rss(proxy.pid))
            time.sleep(0.05)
        growth = highest - before
        assert growth < RSS_GROWTH_LIMIT, (
            f"the proxy's RSS grew by {growth / MiB:.1f} MiB while the client was blocked after "
            f"{sent[0] / MiB:.1f} MiB ({before // KiB} KiB before, {highest // KiB} KiB at most)")
        if stage >= 2:
            r = get(proxy.port, "/meanwhile")
            assert r.status == 200 and r.header("X-Backend") == "recorder", f"{r!r} {r.raw[:200]!r}"
    finally:
        # The client gives up.
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        sender.join(POLL_TIMEOUT)
        release.set()
    assert proxy.alive(), "the proxy died"
    r = get(proxy.port, "/after")
    assert r.status == 200 and r.header("X-Backend") == "recorder", f"{r!r} {r.raw[:200]!r}"
    wait_idle(proxy)


# -- garbage and oversized heads (stage 06) ---------------------------------------------

H = b"Host: www.example.com\r\n"

# (name, bytes sent, rsp's answer)
HOSTILE = [
    ("binary-garbage", random.Random(8).randbytes(2000), 400),
    ("tls-handshake", bytes.fromhex("160301020001000001fc0303") + bytes(range(64)), 400),
    ("nul-bytes", b"\x00" * 100, 400),
    ("endless-request-line", b"GET /" + b"a" * 100_000, 414),
    ("endless-header-line", b"GET / HTTP/1.1\r\n" + H + b"X-Long: " + b"b" * 100_000, 431),
    ("head-over-32k", b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-Fill-%d: %s\r\n" % (i, b"f" * 8000)
                                                          for i in range(5)) + b"\r\n", 431),
    ("101-headers", b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-H%d: %d\r\n" % (i, i) for i in range(100))
     + b"\r\n", 431),
]


@pytest.mark.stage(6)
def test_garbage_and_oversized_heads_among_normal_clients(backend, start_proxy):
    """350 clients sending garbage or oversized heads (50 of each kind
    above) and 350 normal clients, all mixed (a fixed shuffle) over 60
    concurrent threads: each hostile client gets the proxy's own refusal,
    and every normal client gets its own 200 from the backend."""
    proxy = start_proxy(backend)
    jobs = [("hostile", kind) for kind in range(len(HOSTILE)) for _ in range(50)]
    jobs += [("normal", i) for i in range(350)]
    random.Random(6).shuffle(jobs)

    def run(job):
        what, n = job
        with connect(proxy.port) as sock:
            if what == "hostile":
                sock.sendall(HOSTILE[n][1])
            else:
                sock.sendall(build_request(proxy.port, "GET", f"/echo?normal={n}"))
            raw, reset = read_to_eof(sock)
        return job, Response(raw, reset)

    with ThreadPoolExecutor(60) as pool:
        results = list(pool.map(run, jobs))
    for (what, n), r in results:
        if what == "hostile":
            name, _, status = HOSTILE[n]
            assert r.status == status, f"{name}: expected {status}, got {r!r} {r.raw[:200]!r}"
        else:
            assert r.status == 200, f"normal client {n}: {r!r} {r.raw[:200]!r}"
            assert r.json()["path"] == f"/echo?normal={n}", f"normal client {n} got {r.json()['path']}"
    assert backend.hits["/echo"] == 350
    wait_idle(proxy)
