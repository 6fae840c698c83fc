"""The fast path (stage 13): with `splice` on (the default), the body of a
response framed by its Content-Length or by the backend's close goes from
the backend's socket into a pipe and from the pipe to a plain-HTTP
client's socket (splice(2)), never through rsp's memory; a chunked body, a
body de-chunked for an HTTP/1.0 client and every body to an HTTPS client
are copied as before, and so is everything with `splice = false`.

Each test here runs both ways where both apply (splice on and off, chosen
with start_proxy's splice= option, so that RSP_FTS_SPLICE=off changes
nothing here): bodies of 16 MiB of random bytes arrive byte-exact (by
length and by close); status.json's "splice" object ({"bytes": spliced
body bytes, "pipes": pipes held now}) and /metrics' rsp_spliced_bytes_total
and rsp_splice_pipes count what was spliced and only that (about the whole
body by length or by close, nothing for chunked, de-chunked or HTTPS),
while bytes.out still counts every byte the clients got; responses of
every framing, HEAD, 204 and 304 follow each other on one keep-alive
connection and pipelined, in order and byte-exact, over one backend
connection; a backend sending more than its Content-Length has the extra
bytes dropped and its connection closed, one closing early cuts the
client off; a client leaving mid-body leaves no pipe behind (a pipe still
holding its bytes is never used again: a client kept open meanwhile gets
the next body exact) and pipes go back to 0 once no client is left; a
paused, then slow reader of 128 MiB costs rsp a bounded RSS and rsp stops
reading the backend meanwhile; with RLIMIT_NOFILE so small that pipes
cannot be had while ten large downloads run at once, every byte still
arrives; a reload switches splice off and on while a response is in
flight; a `splice` that is not a boolean is a config error. strace counts
the system calls of keep-alive requests (no epoll_ctl, one write and one
writev each) and of new connections (no getsockname: the listener asked
for its port once).

Counters change when bytes move or a response ends: every read of one
that must have moved polls status.json (bounded). Nothing here measures
time; memory is judged by VmRSS, backpressure by what the backend managed
to send while the client did not read.
"""

import hashlib
import itertools
import os
import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import pytest

from backends import _ConnReader, chunked_body
from checks import assert_config_error, assert_serves, wait_for_log
from client import Conn, Reader, Response, build_request, connect, get
from netutil import LOOPBACK, free_port, wait_for, wait_until_listening
from pattern import assert_is_pattern, assert_is_pattern_prefix, assert_same_bytes, pattern, pattern_chunks
from promparse import value as metric_value
from proxy import is_sanitized, proxy_arguments, run_rsp, vm_rss
from test_operations import sighup
from test_status import metrics, rewrite_config, status_json, wait_status
from test_status import start_with_status as start_with_status_listener
from test_write_buffering import assert_rss_bounded, max_rss_during, read_pattern_response

pytestmark = pytest.mark.stage(16)

_stage_under_test = None


@pytest.fixture(autouse=True)
def _note_stage(rsp):
    """Notes the stage under test, for start_with_status."""
    global _stage_under_test
    _stage_under_test = rsp.stage


def start_with_status(start_proxy, *backends, **options):
    """test_status's start_with_status, with response_buffering = false
    from stage 17 on (kept across rewrite_config): these tests measure
    what splice moves, and from stage 17 the bytes a client does not take
    at once are read into rsp's memory or a temporary file instead of
    waiting in the pipe, so that the backend is free (chapter 17); how
    splice and buffering share a response is test_buffering.py's."""
    extra = {"response_buffering": False} if _stage_under_test >= 17 else {}
    proxy = start_with_status_listener(start_proxy, *backends, **extra, **options)
    proxy.status_options = {**proxy.status_options, **extra}
    return proxy

KiB = 1024
MiB = 1024 * KiB
POLL_TIMEOUT = 10.0   # s: a bound on waiting for something that must happen (never a measurement)
# Body bytes that may be copied rather than spliced in one response: those
# that came in the read that brought the head, and what a client's full
# socket had queued when the splice could begin. rsp reads 16 KiB at a
# time and queues at most 64 KiB for a client: this is a generous margin
# that still says "nearly the whole body".
SLACK = 512 * KiB

BOTH = pytest.mark.parametrize("splice", [True, False], ids=["splice-on", "splice-off"])

# What a lying backend sends right behind a body of the announced length:
# a whole second response. If rsp forwarded it, or read it as the answer
# to the next request on that connection, a client would see X-Smuggled.
EXTRA = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nX-Smuggled: yes\r\n\r\nSMUGGLED!"


# -- a backend for this file -------------------------------------------------------------

_random_bodies = {}


def random_body(n, seed):
    """n random bytes, the same for the same (n, seed) (kept: both the
    backend and the test need them)."""
    key = (n, seed)
    if key not in _random_bodies:
        _random_bodies[key] = random.Random(seed).randbytes(n)
    return _random_bodies[key]


class FastPathBackend:
    """An HTTP/1.1 backend on a RawBackend (raw sockets, one thread per
    connection) that keeps connections open and answers, by path:

      /random?n=N&seed=S&framing=length|close
                   N random bytes (random_body), with a Content-Length,
                   or with neither length nor chunked, ending with the
                   connection (framing=close)
      /lie?n=N     N pattern bytes (N >= 1 KiB) with Content-Length: N,
                   and EXTRA right behind them, in the same segment as
                   the body's last KiB; the connection stays
      /count?n=N   N pattern bytes with a Content-Length, counting in
                   `sent` the body bytes the kernel took so far
      /together?n=N  waits until `parties` requests are in (a barrier),
                   sends its head, waits until every one of them has sent
                   its head, then sends N pattern bytes with a
                   Content-Length, and closes
      anything else  "small\\n" with a Content-Length

    Every answer says X-Conn: the connection's number (from 1).
    `conns` maps each connection's number to None while it is open, then
    to how it ended: "peer" (the proxy closed it), "reset", "done" (the
    backend closed it after a close-delimited or /together answer), or
    "error: ..."."""

    def __init__(self, make_raw_backend, parties=0):
        self.lock = threading.Lock()
        self.conns = {}
        self.sent = 0
        self.parties = parties
        if parties:
            self.arrived = threading.Barrier(parties, timeout=POLL_TIMEOUT)
            self.heads_sent = threading.Barrier(parties, timeout=POLL_TIMEOUT)
        self._numbers = itertools.count(1)
        raw = make_raw_backend(self._serve)
        self.host, self.port = raw.host, raw.port
        self.raw = raw

    def ended(self, number):
        """How connection `number` ended (None: still open)."""
        with self.lock:
            return self.conns.get(number)

    def _serve(self, conn, raw):
        number = next(self._numbers)
        with self.lock:
            self.conns[number] = None
        how = "peer"
        reader = _ConnReader(conn)
        try:
            while True:
                reader.compact()
                try:
                    head = reader.until(b"\r\n\r\n")
                except EOFError:
                    break
                raw.record(head)
                if not self._answer(conn, number, head.split(b" ", 2)[1].decode("latin-1")):
                    how = "done"
                    break
        except ConnectionResetError:
            how = "reset"
        except (OSError, threading.BrokenBarrierError) as e:
            how = f"error: {e!r}"
        finally:
            with self.lock:
                self.conns[number] = how

    @staticmethod
    def _head(number, length=None, extra=""):
        framing = f"Content-Length: {length}\r\n" if length is not None else "Connection: close\r\n"
        return (f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n{framing}"
                f"X-Conn: {number}\r\n{extra}\r\n").encode()

    def _answer(self, conn, number, target):
        """Answers one request; False when the connection is to end."""
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        n = int(query.get("n", 0))
        if url.path == "/random":
            body = random_body(n, int(query.get("seed", 1)))
            close = query.get("framing") == "close"
            conn.sendall(self._head(number, None if close else n))
            conn.sendall(body)
            return not close
        if url.path == "/lie":
            # The body's last KiB and the extra bytes in one small write:
            # one segment, so they reach rsp together.
            body = pattern(n)
            conn.sendall(self._head(number, n) + body[:-KiB])
            conn.sendall(body[-KiB:] + EXTRA)
            return True
        if url.path == "/count":
            conn.sendall(self._head(number, n))
            for chunk in pattern_chunks(n):
                conn.sendall(chunk)
                with self.lock:
                    self.sent += len(chunk)
            return True
        if url.path == "/together":
            self.arrived.wait()
            conn.sendall(self._head(number, n, "Connection: close\r\n"))
            self.heads_sent.wait()
            for chunk in pattern_chunks(n):
                conn.sendall(chunk)
            return False
        conn.sendall(self._head(number, 6) + b"small\n")
        return True


@pytest.fixture
def make_fast_backend(make_raw_backend):
    """make_fast_backend(parties=0): a FastPathBackend (stopped at teardown)."""
    return lambda parties=0: FastPathBackend(make_raw_backend, parties)


# -- status.json's "splice" ----------------------------------------------------------------

def splice_of(doc):
    """(bytes, pipes) of status.json's "splice" object, checked for shape:
    both non-negative integers, nothing else required."""
    assert isinstance(doc.get("splice"), dict), f"status.json has no \"splice\" object: {sorted(doc)}"
    figures = doc["splice"]
    for key in ("bytes", "pipes"):
        assert type(figures.get(key)) is int and figures[key] >= 0, f"splice.{key} is {figures.get(key)!r}"
    return figures["bytes"], figures["pipes"]


def quiet_status(proxy, requests=None):
    """status.json once nothing is going on (bounded poll): `requests`
    responses counted (if given), none in flight, no client connection
    open, and therefore no pipe held (idle ones are closed with the last
    client connection)."""
    def quiet(doc):
        _, pipes = splice_of(doc)
        return ((requests is None or doc["requests_total"] >= requests) and doc["requests_in_flight"] == 0
                and doc["connections"] == 0 and pipes == 0)
    what = "no client connection, nothing in flight, no pipe held"
    if requests is not None:
        what = f"{requests} responses counted, " + what
    doc = wait_status(proxy, quiet, what, POLL_TIMEOUT)
    if requests is not None:
        assert doc["requests_total"] == requests, f"{doc['requests_total']} responses counted, {requests} made"
    return doc


def spliced_now(proxy):
    return splice_of(status_json(proxy))[0]


def assert_spliced(spliced, body_bytes, responses):
    """`spliced` is about `body_bytes`, the body bytes of `responses`
    responses that splice moves: at most all of them, at least all but
    SLACK per response."""
    assert body_bytes - responses * SLACK <= spliced <= body_bytes, (
        f"splice.bytes is {spliced}: expected nearly all of the {body_bytes} body bytes of {responses} "
        f"response(s) (at least {body_bytes - responses * SLACK}) and never more")


def assert_metrics_agree(proxy, doc):
    """/metrics (strict parser) has rsp_spliced_bytes_total (a counter)
    and rsp_splice_pipes (a gauge) with status.json's values; nothing
    moved in between."""
    families = metrics(proxy)
    for name, kind in (("rsp_spliced_bytes_total", "counter"), ("rsp_splice_pipes", "gauge")):
        assert name in families, f"/metrics lacks {name}: it has {sorted(families)}"
        assert families[name]["type"] == kind, f"{name} is a {families[name]['type']}, not a {kind}"
        assert families[name]["help"], f"{name} has no HELP"
    spliced, pipes = splice_of(doc)
    assert metric_value(families, "rsp_spliced_bytes_total") == spliced, (families["rsp_spliced_bytes_total"], spliced)
    assert metric_value(families, "rsp_splice_pipes") == pipes, (families["rsp_splice_pipes"], pipes)
    assert metric_value(families, "rsp_bytes_total", direction="out") == doc["bytes"]["out"]


def assert_digest(data, expected, what="body"):
    """data is exactly `expected` (SHA-256 first; the first differing
    offset if not)."""
    if hashlib.sha256(data).digest() != hashlib.sha256(expected).digest():
        assert_same_bytes(data, expected, what)
        raise AssertionError(f"{what}: same bytes but not the same SHA-256?")


# -- large bodies, byte-exact ------------------------------------------------------------

@BOTH
@pytest.mark.parametrize("framing", ["length", "close"])
def test_large_random_bodies_byte_exact(make_fast_backend, start_proxy, splice, framing):
    """16 MiB of random bytes arrive exactly (SHA-256): with a
    Content-Length, two different bodies one after the other on one
    keep-alive connection (a pipe reused for the second holds nothing of
    the first); close-delimited, one body ending with the connection.
    With splice on, splice.bytes is nearly all of them, else 0; bytes.out
    is every byte the client got either way; /metrics agrees."""
    backend = make_fast_backend()
    proxy = start_with_status(start_proxy, backend, splice=splice)
    n = 16 * MiB
    seeds = (11, 12) if framing == "length" else (13,)
    received = 0
    with Conn(proxy.port) as c:
        for seed in seeds:
            r = c.get(f"/random?n={n}&seed={seed}&framing={framing}")
            assert r.status == 200 and r.framing == framing and r.complete, f"{r!r} {r.headers}"
            assert_digest(r.body, random_body(n, seed), f"body {seed}")
            received += len(r.raw)
        if framing == "close":
            assert r.eof and not r.reset, "the connection did not end cleanly after a close-delimited body"
        else:
            assert c.is_open(0.1), "the keep-alive connection ended"
            assert backend.raw.connections == 1, "two responses by length did not share a backend connection"
    doc = quiet_status(proxy, len(seeds))
    spliced, _ = splice_of(doc)
    if splice:
        assert_spliced(spliced, n * len(seeds), len(seeds))
    else:
        assert spliced == 0, f"splice = false, yet splice.bytes is {spliced}"
    assert doc["bytes"]["out"] == received, f"bytes.out {doc['bytes']['out']}, the client got {received}"
    assert_metrics_agree(proxy, doc)


# -- what is spliced, and what is not -------------------------------------------------------

N = 8 * MiB
# (id, path, HTTP version of the request, spliced when splice is on)
FRAMINGS = [
    ("length", f"/cl?size={N}", "1.1", True),
    ("length-to-http10", f"/cl?size={N}", "1.0", True),
    ("close-delimited", f"/close-delimited?size={N}", "1.1", True),
    ("chunked", f"/chunked?size={N}&chunks=64", "1.1", False),
    ("chunked-dechunked-for-http10", f"/chunked?size={N}&chunks=64", "1.0", False),
]


@BOTH
@pytest.mark.parametrize("path, version, spliced", [f[1:] for f in FRAMINGS], ids=[f[0] for f in FRAMINGS])
def test_splice_counter(make_keepalive_backend, start_proxy, splice, path, version, spliced):
    """splice is {"bytes": 0, "pipes": 0} at start. An 8 MiB body by
    length (to an HTTP/1.1 or HTTP/1.0 client) or close-delimited arrives
    exactly, and with splice on splice.bytes grows by about its size (and
    the pipe it used is still held while the client connection stays
    open); a chunked body, passed on chunked or de-chunked for an HTTP/1.0
    client, arrives exactly and is never spliced (bytes 0, no pipe ever).
    With splice off nothing is. bytes.out is every byte the client got,
    spliced or not; once the client is gone no pipe is held; /metrics
    agrees with status.json."""
    ka = make_keepalive_backend("ka")
    proxy = start_with_status(start_proxy, ka, splice=splice)
    assert splice_of(status_json(proxy)) == (0, 0), status_json(proxy)["splice"]
    expected = pattern(N)
    with Conn(proxy.port) as c:
        r = c.request("GET", path, version=version)
        assert r.status == 200 and r.complete, f"{r!r} {r.headers}"
        assert_same_bytes(r.decoded, expected)
        if path.startswith("/chunked"):
            if version == "1.1":
                assert r.framing == "chunked", r.headers
                assert_same_bytes(r.body, chunked_body(N, 64)[0], "the chunked body as the backend sent it")
            else:
                assert r.header("Transfer-Encoding") is None and r.framing == "close", r.headers
        if version == "1.1" and not path.startswith("/close"):
            doc = wait_status(proxy, lambda d: d["requests_total"] >= 1, "the response counted")
            _, pipes = splice_of(doc)
            if splice and spliced:
                assert pipes >= 1, f"a body was spliced and the client is still there, yet splice.pipes is {pipes}"
            else:
                assert pipes == 0, f"nothing was spliced, yet splice.pipes is {pipes}"
    doc = quiet_status(proxy, 1)
    moved, _ = splice_of(doc)
    if splice and spliced:
        assert_spliced(moved, N, 1)
    else:
        assert moved == 0, f"this body must not be spliced, yet splice.bytes is {moved}"
    assert doc["bytes"]["out"] == len(r.raw), f"bytes.out {doc['bytes']['out']}, the client got {len(r.raw)}"
    assert_metrics_agree(proxy, doc)


def test_https_never_spliced(backend, start_proxy, tmp_path):
    """With splice on and a TLS listener (stage 12), an 8 MiB body to an
    HTTPS client arrives exactly and splice.bytes stays 0 (rsp must
    encrypt it); the same body to a plain client of the same rsp right
    after is spliced. (Skipped without python3-trustme.)"""
    pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")
    from tlsutil import https_get, session_ca
    name = "www.example.test"
    cert = session_ca().issue(tmp_path, "www", [name])
    tls_port = free_port()
    proxy = start_with_status(start_proxy, backend, splice=True,
                              tls={"listen": f"{LOOPBACK}:{tls_port}", "certificates": [cert.entry()]})
    wait_until_listening(tls_port, proxy.process, POLL_TIMEOUT, what="rsp's TLS listener")
    r = https_get(tls_port, f"/bytes?n={N}", session_ca().client_context(), name)
    assert r.status == 200 and r.complete, r
    assert_is_pattern(r.body, N)
    doc = quiet_status(proxy, 1)
    assert splice_of(doc)[0] == 0, f"a body to an HTTPS client was spliced: {doc['splice']}"
    assert_serves(proxy, N)
    assert_spliced(splice_of(quiet_status(proxy, 2))[0], N, 1)


# -- keep-alive, pipelining ------------------------------------------------------------------

BIG, ODD = 4 * MiB, 3 * MiB + 1
SEQUENCE = [
    ("GET", f"/cl?size={BIG}"),
    ("GET", "/cl?size=10"),
    ("GET", "/chunked?size=1048576&chunks=7"),
    ("HEAD", f"/cl?size={BIG}"),
    ("GET", "/status?code=204"),
    ("GET", "/cl?size=0"),
    ("GET", f"/cl?size={ODD}"),
    ("HEAD", "/chunked?size=5000"),
    ("GET", "/status?code=304"),
    ("GET", "/cl?size=65537"),
]
# The body bytes of a round that splice may move (GETs by length), and
# the responses among them big enough that it must.
SPLICEABLE = sum(int(t.split("=")[1]) for m, t in SEQUENCE if m == "GET" and t.startswith("/cl"))
MUST_SPLICE = (BIG, ODD)


def check_answer(r, method, target, number):
    """r is the KeepAliveBackend's answer to `method target`, the
    number-th request on its backend connection."""
    what = f"{method} {target} (request {number})"
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    assert r.status is not None and r.complete, f"{what}: {r!r} {r.raw[:300]!r}"
    assert r.header("X-Request") == str(number), f"{what}: got the answer to request {r.header('X-Request')}"
    if url.path == "/status":
        assert r.status == int(query["code"]) and r.body == b"", f"{what}: {r!r}"
    elif url.path == "/cl":
        size = int(query["size"])
        assert r.status == 200 and r.header("Content-Length") == str(size), f"{what}: {r!r} {r.headers}"
        if method == "HEAD":
            assert r.body == b"", f"{what}: a HEAD got a body"
        else:
            assert r.framing == "length", f"{what}: {r.headers}"
            assert_is_pattern(r.body, size, what)
    else:
        assert r.status == 200 and r.header("Transfer-Encoding") == "chunked", f"{what}: {r!r} {r.headers}"
        if method == "HEAD":
            assert r.body == b"", f"{what}: a HEAD got a body"
        else:
            raw, _ = chunked_body(int(query["size"]), int(query["chunks"]))
            assert_same_bytes(r.body, raw, what)


@BOTH
def test_keepalive_sequence_and_pipelining(make_keepalive_backend, start_proxy, splice):
    """On one client connection: big and small bodies by length, a chunked
    one, HEADs (one announcing 4 MiB), 204, 304 and an empty body, first
    one at a time, then twice over pipelined in one write. Every answer
    comes in order (the backend numbers them), complete and byte-exact,
    and all 30 go over one backend connection (each spliced body ended
    exactly at its length). With splice on the big bodies are spliced,
    nothing else can be; with splice off nothing is; bytes.out is every
    byte the client got."""
    ka = make_keepalive_backend("ka")
    proxy = start_with_status(start_proxy, ka, splice=splice)
    received = 0
    number = 0
    with Conn(proxy.port) as c:
        for method, target in SEQUENCE:
            number += 1
            r = c.request(method, target)
            check_answer(r, method, target, number)
            received += len(r.raw)
        c.send(b"".join(c.request_bytes(method, target) for method, target in SEQUENCE * 2))
        for method, target in SEQUENCE * 2:
            number += 1
            r = c.read_response(head=(method == "HEAD"))
            check_answer(r, method, target, number)
            received += len(r.raw)
        assert c.is_open(0.1), "the connection ended after the pipelined requests"
    assert ka.connections == 1, f"the backend connection was not reused throughout: {ka.conns}"
    assert [(rec.method, rec.target) for rec in ka.records] == SEQUENCE * 3
    doc = quiet_status(proxy, 3 * len(SEQUENCE))
    spliced, _ = splice_of(doc)
    if splice:
        assert 3 * (sum(MUST_SPLICE) - len(MUST_SPLICE) * SLACK) <= spliced <= 3 * SPLICEABLE, (
            f"splice.bytes is {spliced}: expected nearly the {3 * sum(MUST_SPLICE)} bytes of the big bodies, "
            f"at most the {3 * SPLICEABLE} of every body by length")
    else:
        assert spliced == 0, f"splice = false, yet splice.bytes is {spliced}"
    assert doc["bytes"]["out"] == received, f"bytes.out {doc['bytes']['out']}, the client got {received}"


# -- backends that break their word ------------------------------------------------------------

@BOTH
def test_backend_sending_more_than_content_length(make_fast_backend, start_proxy, splice):
    """A backend sends a whole second response right behind a 4 MiB body
    of the announced length, in the same segment as its end. The client gets exactly
    the 4 MiB and nothing after them; rsp closes that backend connection
    (it cannot be reused); the next request, one at a time or pipelined
    behind another such answer, goes over a new backend connection and
    gets its own answer, never the smuggled one."""
    backend = make_fast_backend()
    proxy = start_with_status(start_proxy, backend, splice=splice)
    n = 4 * MiB
    with Conn(proxy.port) as c:
        r = c.get(f"/lie?n={n}")
        assert r.status == 200 and r.framing == "length" and r.complete, f"{r!r} {r.headers}"
        assert_is_pattern(r.body, n)
        first = int(r.header("X-Conn"))
        assert c.state(0.3) == "open", f"more came after the body: {bytes(c.reader.buf[:200])!r}"
        wait_for(lambda: backend.ended(first) is not None,
                 "rsp closing the backend connection that sent more than its Content-Length", POLL_TIMEOUT)
        r = c.get("/small")
        assert r.status == 200 and r.body == b"small\n" and r.header("X-Smuggled") is None, f"{r!r} {r.raw[:300]!r}"
        assert int(r.header("X-Conn")) != first, "the backend connection with extra bytes was used again"

        c.send(c.request_bytes("GET", f"/lie?n={n}&again=1") + c.request_bytes("GET", "/small?after=lie"))
        r = c.read_response()
        assert r.status == 200 and r.complete, f"{r!r} {r.headers}"
        assert_is_pattern(r.body, n)
        lied = int(r.header("X-Conn"))
        r = c.read_response()
        assert r.status == 200 and r.body == b"small\n" and r.header("X-Smuggled") is None, f"{r!r} {r.raw[:300]!r}"
        assert int(r.header("X-Conn")) != lied, "the backend connection with extra bytes was used again"
        assert c.is_open(0.1)
    wait_for(lambda: backend.ended(lied) is not None, "rsp closing the second lying connection", POLL_TIMEOUT)
    quiet_status(proxy, 4)


@BOTH
@pytest.mark.parametrize("rst", [False, True], ids=["fin", "rst"])
def test_backend_closing_before_content_length(backend, start_proxy, splice, rst):
    """A backend announces 16 MiB, sends half and closes (or resets). The
    client gets a prefix of the body, uncorrupted, and then the end of
    its connection, never a complete response. Meanwhile another client
    connection stays open (so idle pipes are kept): it then gets an 8 MiB
    body exact, and a new client is served too; afterwards no pipe is
    held."""
    n = 16 * MiB
    proxy = start_with_status(start_proxy, backend, splice=splice)
    with Conn(proxy.port) as keeper:
        r = keeper.get("/bytes?n=1000")
        assert r.status == 200 and r.complete, r
        with Conn(proxy.port) as c:
            r = c.get(f"/close-mid?n={n}&rst={int(rst)}")
            assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
            assert not r.complete and len(r.body) < n, f"{r!r}: a response cut short arrived complete"
            assert_is_pattern_prefix(r.body, "the body cut short")
            assert r.eof, "the client's connection did not end after the backend cut the body short"
        r = keeper.get(f"/bytes?n={N}")
        assert r.status == 200 and r.complete, r
        assert_is_pattern(r.body, N, "a body after the cut one")
        assert_serves(proxy, N)
    quiet_status(proxy)


# -- clients that go away ----------------------------------------------------------------------

@BOTH
def test_client_leaving_mid_body(make_keepalive_backend, start_proxy, splice):
    """A client reads 1 MiB of a 32 MiB body and closes. rsp closes the
    backend connection that carried it (its body is unfinished), keeps
    serving: a client connection held open meanwhile (so that idle pipes
    are kept, and a pipe still holding the gone client's bytes would be
    used again if rsp put it back) gets a 4 MiB body exact, over another
    backend connection. Once no client is left, no pipe is held (and the
    teardown check finds no fd left behind)."""
    ka = make_keepalive_backend("ka")
    proxy = start_with_status(start_proxy, ka, splice=splice)
    n = 32 * MiB
    with Conn(proxy.port) as keeper:
        r = keeper.get("/cl?size=1000")
        assert r.status == 200 and r.complete, r
        with connect(proxy.port) as sock:
            sock.sendall(build_request(proxy.port, "GET", f"/cl?size={n}"))
            reader = Reader(sock)
            head = Response(reader.until(b"\r\n\r\n", "the response head"))
            assert head.status == 200, head
            gone = int(head.header("X-Conn"))
            body = reader.exactly(MiB, "the first MiB of the body")
            assert_is_pattern(body, MiB, "the first MiB")
        wait_for(lambda: ka.conns[gone].closed is not None,
                 "rsp closing the backend connection whose client left mid-body", POLL_TIMEOUT)
        if splice:
            doc = status_json(proxy)
            assert splice_of(doc)[0] > 0, f"nothing was spliced to the client that left: {doc['splice']}"
        r = keeper.get(f"/cl?size={4 * MiB}")
        assert r.status == 200 and r.complete, r
        assert_is_pattern(r.body, 4 * MiB, "the next body on another client connection")
        assert int(r.header("X-Conn")) != gone, "the backend connection of the client that left was used again"
    quiet_status(proxy)


# -- backpressure --------------------------------------------------------------------------------

@BOTH
def test_slow_reader_of_a_large_body(make_fast_backend, start_proxy, splice):
    """A client asks for 128 MiB and reads nothing for two seconds, then
    reads 1 MiB in 4 KiB pieces with pauses, then the rest at full speed.
    Meanwhile rsp's RSS grows by less than 8 MiB and the backend cannot
    send even half the body (rsp stops reading it: backpressure, through
    the pipe too); with splice on the paused body holds a pipe
    (splice.pipes at least 1). Every byte arrives, and with splice on
    nearly all of them were spliced."""
    n = 128 * MiB
    backend = make_fast_backend()
    proxy = start_with_status(start_proxy, backend, splice=splice)
    before = vm_rss(proxy.pid)
    with connect(proxy.port, rcvbuf=16 * KiB) as sock:
        sock.sendall(build_request(proxy.port, "GET", f"/count?n={n}"))
        highest = max_rss_during(proxy.pid, 2.0)
        sent = backend.sent
        assert 0 < sent < n // 2, (f"the backend sent {sent / MiB:.1f} MiB of {n // MiB} while the client read "
                                   f"nothing: rsp does not stop reading it")
        _, pipes = splice_of(status_json(proxy))
        if splice:
            assert pipes >= 1, f"a spliced body waits for the client, yet splice.pipes is {pipes}"
        else:
            assert pipes == 0, f"splice = false, yet splice.pipes is {pipes}"
        reader = Reader(sock)
        head = Response(reader.until(b"\r\n\r\n", "the response head"))
        assert head.status == 200 and head.header("Content-Length") == str(n), head
        body = reader.take(len(reader.buf))
        got = len(body)
        assert_is_pattern(body, got, "the body's start")
        reads = 0
        while got < MiB:
            chunk = sock.recv(4096)
            assert chunk, f"the connection ended after {got} body bytes"
            if chunk != pattern(len(chunk), offset=got):
                raise AssertionError(f"the body differs from the pattern within bytes {got}-{got + len(chunk)}")
            got += len(chunk)
            reads += 1
            if reads % 16 == 0:
                time.sleep(0.002)
                highest = max(highest, vm_rss(proxy.pid))
        view = memoryview(bytearray(MiB))
        while got < n:
            k = sock.recv_into(view, min(MiB, n - got))
            assert k, f"the connection ended after {got} of {n} body bytes"
            if bytes(view[:k]) != pattern(k, offset=got):
                raise AssertionError(f"the body differs from the pattern within bytes {got}-{got + k}")
            got += k
    if not is_sanitized(proxy.binary):
        assert_rss_bounded(before, highest, f"a {n // MiB} MiB body to a paused, then slow reader")
    doc = quiet_status(proxy, 1)
    spliced, _ = splice_of(doc)
    if splice:
        assert_spliced(spliced, n, 1)
    else:
        assert spliced == 0, f"splice = false, yet splice.bytes is {spliced}"


# -- out of descriptors: no pipe to be had -----------------------------------------------------------

DOWNLOADS = 10   # at once


@pytest.mark.parametrize("splice, spare", [(True, 1), (True, 5), (False, 5)],
                         ids=["splice-on-no-room-for-a-pipe", "splice-on-room-for-two-pipes", "splice-off"])
def test_many_large_downloads_with_few_descriptors(make_fast_backend, start_proxy, splice, spare):
    """rsp runs with RLIMIT_NOFILE just large enough for what it holds at
    startup, ten clients and their ten backend connections, plus `spare`
    descriptors: 1 (no pipe, which takes two, can be made while all ten
    run: pipe() fails with EMFILE) or 5 (two pipes at most). The backend
    answers only once all ten requests are in, and sends the bodies only
    once all ten heads are out, so that all ten are under way at once.
    Every one of the ten 8 MiB bodies arrives exactly; with room for two
    pipes some bytes were spliced; afterwards no pipe is held."""
    n = 8 * MiB
    probe = start_with_status(start_proxy, make_fast_backend(), splice=splice)   # how many fds rsp holds at startup
    backend = make_fast_backend(parties=DOWNLOADS)
    nofile = probe.baseline_fds + 2 * DOWNLOADS + spare
    proxy = start_with_status(start_proxy, backend, splice=splice, nofile=nofile)
    assert proxy.baseline_fds == probe.baseline_fds, \
        f"rsp held {probe.baseline_fds} fds at startup, and {proxy.baseline_fds} with RLIMIT_NOFILE {nofile}"

    def download(i):
        with connect(proxy.port) as sock:
            sock.sendall(build_request(proxy.port, "GET", f"/together?n={n}&i={i}"))
            return read_pattern_response(sock)

    with ThreadPoolExecutor(DOWNLOADS) as pool:
        results = list(pool.map(download, range(DOWNLOADS)))
    for i, r in enumerate(results):
        r.assert_pattern(n, f"download {i}")
    assert backend.raw.connections == DOWNLOADS
    doc = quiet_status(proxy, DOWNLOADS)
    spliced, _ = splice_of(doc)
    if not splice:
        assert spliced == 0, f"splice = false, yet splice.bytes is {spliced}"
    elif spare >= 2:
        assert spliced > 0, "there was room for a pipe, yet nothing was spliced"
    assert spliced <= DOWNLOADS * n, f"splice.bytes is {spliced}, more than the {DOWNLOADS * n} body bytes"


# -- reloads --------------------------------------------------------------------------------------

def test_reload_switches_splice(make_backend, start_proxy, rsp, tmp_path):
    """splice on, then a reload to splice = false, then back to true,
    while a 2.5 MiB response trickles to a client that connected first
    (it arrives exact, across both reloads). An 8 MiB download on a new
    connection is spliced before the first reload (splice.bytes grows by
    nearly 8 MiB), copied after it (it grows by no more than what the
    trickling response may add), and spliced again after the second;
    every body exact."""
    a = make_backend("a")
    proxy = start_with_status(start_proxy, a, splice=True)
    pieces, piece = 40, 64 * KiB
    drip = pieces * piece
    done = 0

    def download():
        nonlocal done
        before = spliced_now(proxy)
        with Conn(proxy.port) as c:
            response = c.get(f"/bytes?n={N}")
        assert response.status == 200 and response.complete, response
        assert_is_pattern(response.body, N)
        done += 1
        doc = wait_status(proxy, lambda d: d["requests_total"] >= done, f"{done} responses counted")
        return splice_of(doc)[0] - before

    with connect(proxy.port, timeout=20) as sock:
        sock.sendall(build_request(proxy.port, "GET", f"/drip?chunks={pieces}&size={piece}&delay=0.05"))
        reader = Reader(sock)
        head = Response(reader.until(b"\r\n\r\n", "the trickling response's head"))
        assert head.status == 200, head
        grown = download()
        assert N - SLACK <= grown <= N + drip, f"splice on: splice.bytes grew by {grown} for an {N}-byte body"

        rewrite_config(rsp, proxy, tmp_path, [a], splice=False)
        sighup(proxy, 2)
        grown = download()
        assert grown <= drip, f"splice = false: splice.bytes grew by {grown} for an {N}-byte body"

        rewrite_config(rsp, proxy, tmp_path, [a], splice=True)
        sighup(proxy, 3)
        grown = download()
        assert N - SLACK <= grown <= N + drip, f"splice on again: splice.bytes grew by {grown} for an {N}-byte body"

        body = reader.to_eof("the trickling body")
    assert_is_pattern(body, drip, "the body trickling across the reloads")
    quiet_status(proxy, 4)


# -- the setting -----------------------------------------------------------------------------------

B = (LOOPBACK, 1)     # a backend nothing has to answer at: these configs never serve
LISTEN_PORT = 18080   # written into the configs only: never bound

BAD_SPLICE = [("string-yes", "yes"), ("string-true", "true"), ("one", 1), ("zero", 0), ("table", [True])]


@pytest.mark.parametrize("value", [b[1] for b in BAD_SPLICE], ids=[b[0] for b in BAD_SPLICE])
def test_bad_splice_setting(rsp, tmp_path, value):
    """splice must be a boolean: anything else makes rsp -t exit 1 with
    one line on stderr naming the config file and the setting, and a start
    exit with an error and the very same line."""
    (path,) = proxy_arguments(rsp.stage, LISTEN_PORT, [B], str(tmp_path), {"splice": value})
    line = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, status=1)
    assert "splice" in line.replace(path, ""), f"the error does not name the setting: {line!r}"
    started = run_rsp(rsp, [path], tmp_path)
    assert started.returncode != 0, f"rsp started with splice = {value!r}"
    assert started.stderr.splitlines() == [line], f"rsp -t said {line!r}, a start said {started.stderr!r}"


@pytest.mark.parametrize("value", [True, False], ids=["true", "false"])
def test_good_splice_setting(rsp, tmp_path, value):
    """splice = true and splice = false pass rsp -t."""
    (path,) = proxy_arguments(rsp.stage, LISTEN_PORT, [B], str(tmp_path), {"splice": value})
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout


# -- workers ---------------------------------------------------------------------------------------

def test_killed_worker_takes_its_pipes_along(make_fast_backend, start_proxy):
    """workers = 2: a client that reads nothing of a 64 MiB body holds a
    pipe in the worker serving it (splice.pipes counts it, summed over
    every worker). kill -9 of that worker: its pipes are gone with it, and
    once the master has replaced it splice.pipes is 0 again, not a count
    left behind by a process that no longer exists; the proxy serves a
    spliced body exactly after it."""
    from test_workers import owners, started_workers
    backend = make_fast_backend()
    proxy = start_with_status(start_proxy, backend, workers=2, splice=True)
    pids = started_workers(proxy, 2)
    with connect(proxy.port, rcvbuf=16 * KiB) as stalled:
        stalled.sendall(build_request(proxy.port, "GET", f"/count?n={64 * MiB}"))
        wait_status(proxy, lambda doc: splice_of(doc)[1] >= 1, "a pipe held for the stalled client",
                    POLL_TIMEOUT)
        (holder,) = owners(stalled, proxy.port, pids)
        os.kill(holder, signal.SIGKILL)
        wait_for_log(proxy, f"(pid {holder}) was killed by signal 9; starting another", POLL_TIMEOUT)
        doc = wait_status(proxy, lambda doc: splice_of(doc)[1] == 0,
                          "splice.pipes back to 0 once the worker holding the pipe is gone", POLL_TIMEOUT)
    n = 4 * MiB
    before = splice_of(doc)[0]
    r = Conn(proxy.port).get(f"/count?n={n}")
    assert r.status == 200 and len(r.body) == n, r
    assert splice_of(status_json(proxy))[0] > before, "the body after the kill was not spliced"


# -- system calls ----------------------------------------------------------------------------------

def traced(pid, names, action):
    """Runs action() with strace attached to process `pid`, tracing the
    system calls `names`; returns the lines strace wrote (calls and their
    results: counted by the tests, never timed)."""
    import shutil
    import subprocess
    import tempfile
    if shutil.which("strace") is None:
        pytest.skip("no strace here (setup-env.sh installs it)")
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=" + ",".join(names), "-o", out.name,
                                   "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def attached():
                with open(f"/proc/{pid}/status") as f:
                    return any(line.startswith("TracerPid:") and line.split()[1] != "0" for line in f)
            wait_for(attached, "strace attached to rsp", POLL_TIMEOUT)
            action()
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=POLL_TIMEOUT)
        return out.read().splitlines()


def traced_calls(pid, names, action):
    """Runs action() under traced(); returns {name: how many calls}.
    (Counts, never times: what rsp does per request, not how fast.)"""
    counts = dict.fromkeys(names, 0)
    for line in traced(pid, names, action):
        call = line.split(maxsplit=1)[-1].split("(", 1)[0]
        if call in counts:
            counts[call] += 1
    return counts


def test_keepalive_requests_leave_epoll_alone_and_write_once(make_keepalive_backend, start_proxy):
    """On a keep-alive client connection whose backend connection is
    pooled, 50 requests in a row (a 600-byte answer that the backend sends
    head and body in one write) make no epoll_ctl at all (the client's
    registration is kept while each request is at the backend; nothing is
    queued, so EPOLLOUT is never asked for), and one write per request to
    the backend plus one per response to the client: the head and the body
    rsp read together leave together (a writev; from stage 23, a small
    answer is gathered and leaves in a single write)."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    n = 50
    with Conn(proxy.port) as conn:
        for _ in range(3):  # the backend connection made and pooled, the registrations settled
            r = conn.get("/cl?size=600")
            assert r.status == 200 and len(r.body) == 600, r

        def requests():
            for _ in range(n):
                r = conn.get("/cl?size=600")
                assert r.status == 200 and len(r.body) == 600, r
        counts = traced_calls(proxy.pid, ("epoll_ctl", "write", "writev"), requests)
    assert counts["epoll_ctl"] == 0, f"{counts['epoll_ctl']} epoll_ctl calls for {n} keep-alive requests"
    assert counts["writev"] + counts["write"] == 2 * n, \
        f"for {n} requests: {counts['write']} write and {counts['writev']} writev calls " \
        f"(expected one write to the backend and one write or writev to the client each)"


def test_new_connections_make_no_getsockname(backend, start_proxy):
    """A request on a new connection costs no getsockname: the listener
    asked its socket for the port once, when it started, and every client
    it accepts came to that port. 20 requests, each on its own connection,
    all forwarded with X-Forwarded-Port: the listener's port."""
    proxy = start_proxy(backend)
    n = 20
    ports = []

    def requests():
        for _ in range(n):
            r = get(proxy.port, "/echo")
            assert r.status == 200, r
            ports.append([value for name, value in r.json()["headers"] if name.lower() == "x-forwarded-port"])
    counts = traced_calls(proxy.pid, ("accept4", "getsockname"), requests)
    assert counts["accept4"] >= n, f"strace saw {counts['accept4']} accept4 calls for {n} connections"
    assert counts["getsockname"] == 0, f"{counts['getsockname']} getsockname calls for {n} new connections"
    assert ports == [[str(proxy.port)]] * n, f"X-Forwarded-Port as the backend got it: {ports}"
