"""HTTP/2 to clients (stage 20): the TLS listener offers ALPN h2, then
http/1.1 (`tls.http2 = false`: http/1.1 only); the plain listener stays
HTTP/1.1 (no h2c). Each stream is an exchange with the rules of an
HTTP/1.1 request (routing by :authority, route() seeing the same request
table, rsp's own checks, forwarded headers, limits and timeouts, the
access log's "GET /p HTTP/2.0") and goes to the backends over HTTP/1.1;
up to `http2_max_streams` (128) at once, advertised in
SETTINGS_MAX_CONCURRENT_STREAMS, a stream over it refused; a slow stream
holds no other; flow control is backpressure (a stream its client stops
reading costs bounded memory while others go on).

Malformed requests (RFC 9113 sections 8.1.1, 8.2, 8.3) get a stream
error (RST_STREAM PROTOCOL_ERROR) or a 400, and nothing of them reaches a
backend (a KeepAliveBackend records every request it gets): the
connection and other clients are served on. Floods (rapid reset,
MadeYouReset, CONTINUATION, SETTINGS, PING, PRIORITY, empty DATA, HPACK
bombs) end the connection, with a GOAWAY of ENHANCE_YOUR_CALM or
PROTOCOL_ERROR (COMPRESSION_ERROR too for header blocks) where the client
reads; each flood is bounded (10,000 frames, 50,000 for a client that
does not read). A client that closes its window for good is cut off by
the timeouts. SIGHUP and SIGTERM send GOAWAY and let a stream in flight
finish; status.json and /metrics count requests by protocol and the open
HTTP/2 connections and streams. h2load, curl --http2 and nghttp are served.

The clients are fts/h2client.py's: H2Client (python3-h2's H2Connection,
its outbound checks off so that it can send what broken clients send;
inbound, h2 checks every frame rsp sends) and RawH2 (frame by frame).
Ordering is asserted through events (a stream answered while another's
backend still holds its answer), never through time; memory is judged by
rsp's resident set size while a stream is stalled, with a generous
bound; every wait is bounded.
"""

import hashlib
import json
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")
pytest.importorskip("h2", reason="python3-h2 is not installed (./setup-env.sh installs it)")

from backends import KeepAliveBackend, RawBackend, read_head, wait_for_eof  # noqa: E402
from checks import assert_config_error  # noqa: E402
from client import Conn, connect  # noqa: E402
from h2client import (CANCEL, COMPRESSION_ERROR, CONTINUATION, DATA, END_STREAM, ENHANCE_YOUR_CALM,  # noqa: E402
                      HEADER_TABLE_SIZE, HEADERS, INITIAL_WINDOW_SIZE, MAX_CONCURRENT_STREAMS, NO_ERROR, PING,
                      PRIORITY, PROTOCOL_ERROR, REFUSED_STREAM, RST_STREAM, SETTINGS, WINDOW_UPDATE, ENABLE_PUSH,
                      H2Client, RawH2, error_name, frame, h2_context, hpack_indexed, hpack_literal,
                      request_headers, settings_payload, static_request_block)
from netutil import LOOPBACK, free_port, wait_for, wait_until_listening  # noqa: E402
from pattern import assert_is_pattern, pattern  # noqa: E402
from promparse import value as metric_value  # noqa: E402
from proxy import is_sanitized, large_bodies, proxy_arguments, run_rsp, streamed, unbuffered, vm_rss  # noqa: E402
from test_access_log import assert_line, wait_lines  # noqa: E402
from test_access_log import parse as parse_line  # noqa: E402
from test_operations import sighup  # noqa: E402
from test_status import metrics, wait_status  # noqa: E402
from test_tls import start_tls  # noqa: E402
from tlsutil import TLSConn, https_get, session_ca  # noqa: E402

pytestmark = pytest.mark.stage(20)

KiB = 1024
MiB = 1024 * KiB
POLL_TIMEOUT = 10.0        # s: a bound on waiting for something that must happen (never a measurement)
FIRED_BY = 10.0            # s: a short timeout must have ended the connection by then (a bound)
SHORT_TIMEOUT = 0.5        # s: idle_timeout and keepalive_timeout where a test is about them
GATE_WAIT = 30.0           # s: a gated backend answers unasked after this (a guard; the tests open it)
DEFAULT_MAX_STREAMS = 128  # http2_max_streams' default, advertised as SETTINGS_MAX_CONCURRENT_STREAMS
FLOOD_FRAMES = 10_000      # frames of a flood sent by a client that reads what rsp answers
UNREAD_FLOOD_FRAMES = 50_000  # frames of a flood from a client that reads nothing (its buffer is small)
BATCH = 100                # frames written at once in a flood; the client reads between batches
RSS_LIMIT = 16 * MiB       # what a stalled 50 MiB stream or a flood may add to rsp's resident memory
PAUSE = 2.0                # s: how long a stalled stream is watched (RSS sampled), not a wait for anything
RSS_SAMPLES = 8
WWW = "www.example.test"   # the name most tests use (SNI and :authority)
A_SITE, B_SITE = "a.example.test", "b.example.test"
FLOOD_CODES = (ENHANCE_YOUR_CALM, PROTOCOL_ERROR)                       # a GOAWAY that fits a flood
HEADER_FLOOD_CODES = (ENHANCE_YOUR_CALM, PROTOCOL_ERROR, COMPRESSION_ERROR)  # ... of header blocks


# -- fixtures and helpers --------------------------------------------------------------


@pytest.fixture(scope="session")
def ca():
    return session_ca()


@pytest.fixture(scope="session")
def cert(ca, tmp_path_factory):
    """One certificate for www.example.test, a.example.test and
    b.example.test (a connection to one may carry requests for another)."""
    return ca.issue(tmp_path_factory.mktemp("h2certs"), "h2", [WWW, A_SITE, B_SITE])


@pytest.fixture(scope="session")
def ctx(ca):
    """A client context offering h2, then http/1.1."""
    return h2_context(ca)


@pytest.fixture(scope="session")
def ctx11(ca):
    """A client context offering http/1.1 only: an HTTP/1.1 client of the TLS listener."""
    return ca.client_context(alpn=["http/1.1"])


class GatedBackend(KeepAliveBackend):
    """A KeepAliveBackend with one more route, /gate?size=N: N pattern
    bytes, answered only once the test opens `gate` (a threading.Event;
    after GATE_WAIT s the backend closes the connection unanswered)."""

    def __init__(self, name="gated"):
        super().__init__(name)
        self.gate = threading.Event()

    def _route_gate(self, info, record, query, head_only, closing):
        if not self.gate.wait(GATE_WAIT):
            return "gate never opened"
        self._route_cl(info, record, query, head_only, closing)
        return None

    def stop(self):
        self.gate.set()
        super().stop()


@pytest.fixture
def ka():
    """A KeepAliveBackend named "ka" that records every request."""
    backend = KeepAliveBackend("ka")
    yield backend
    backend.stop()


@pytest.fixture
def gated():
    backend = GatedBackend()
    yield backend
    backend.stop()


def start_h2(start_proxy, *backends, cert, tls=None, **options):
    """rsp with a TLS listener serving `cert` (proxy.tls_port); tls= adds
    fields to the tls table (http2 = false)."""
    return start_tls(start_proxy, *backends, certificates=[cert], tls=tls, **options)


def with_status(start_proxy, *backends, cert, **options):
    """start_h2 with the status listener on (proxy.status_port)."""
    status_port = free_port()
    proxy = start_h2(start_proxy, *backends, cert=cert, status_listen=status_port, **options)
    wait_until_listening(status_port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = status_port
    return proxy


def h2(proxy, ctx, server_name=WWW, **options):
    """An H2Client to the proxy's TLS port."""
    return H2Client(proxy.tls_port, ctx, server_name, timeout=POLL_TIMEOUT, **options)


def raw(proxy, ctx, server_name=WWW, **options):
    """A RawH2 to the proxy's TLS port."""
    return RawH2(proxy.tls_port, ctx, server_name, timeout=POLL_TIMEOUT, **options)


def lowered(headers):
    """[(lowercase name, value)] of (name, value) pairs."""
    return [(n.lower(), v) for n, v in headers]


def assert_h2_serves(proxy, ctx, n=1000):
    """A new HTTP/2 connection gets a GET of /cl?size=N (a KeepAliveBackend's
    route) answered in full."""
    with h2(proxy, ctx) as c:
        st = c.get(f"/cl?size={n}")
    assert st.status == 200, f"a normal HTTP/2 request failed: {st!r}"
    assert_is_pattern(st.body, n)


def assert_http1_tls_serves(proxy, ca, n=1000):
    r = https_get(proxy.tls_port, f"/cl?size={n}", ca.client_context(alpn=["http/1.1"]), WWW)
    assert r.status == 200, f"a normal HTTP/1.1 request over TLS failed: {r!r}"
    assert_is_pattern(r.body, n)


def assert_others_served(proxy, ctx, n=1000):
    """Other clients are served: HTTP/2, HTTP/1.1 over TLS, plain HTTP."""
    assert proxy.alive(), f"rsp died\n{proxy.describe()}"
    assert_h2_serves(proxy, ctx, n)
    assert_http1_tls_serves(proxy, session_ca(), n)
    with Conn(proxy.port, host=WWW) as c:
        r = c.get(f"/cl?size={n}")
    assert r.status == 200, f"a plain HTTP request failed: {r!r}"


def max_rss_while_reading(pid, client, seconds, samples=RSS_SAMPLES):
    """The largest VmRSS of `pid` sampled evenly over `seconds` while
    `client` (an H2Client) goes on reading and sending as its windows allow
    (as test_write_buffering.py watches a stalled transfer: a bound on
    memory, not a wait for anything)."""
    highest = 0
    for _ in range(samples):
        end = time.monotonic() + seconds / samples
        while time.monotonic() < end:
            client.read_once(max(0.0, min(0.05, end - time.monotonic())))
        highest = max(highest, vm_rss(pid))
    return highest


def assert_rss_bounded(proxy, before, after, what, limit=RSS_LIMIT):
    """rsp's RSS grew by less than `limit`; not judged under AddressSanitizer,
    whose quarantine keeps what rsp frees (LeakSanitizer checks leaks at
    exit instead), as test_pipelining_memory.py does."""
    if is_sanitized(proxy.binary):
        return
    growth = after - before
    assert growth < limit, (f"{what}: rsp's RSS grew by {growth / MiB:.1f} MiB ({before // KiB} KiB before, "
                            f"{after // KiB} KiB at most after; limit {limit // MiB} MiB)")


def targets(backend):
    """The request targets a KeepAliveBackend received, in order."""
    return [r.target for r in backend.records]


def assert_flood_ended(r, codes, what, need_goaway=True):
    """After a flood on RawH2 `r`: the connection ends (bounded), with a
    GOAWAY of one of `codes` if need_goaway (any GOAWAY seen must have one
    of them anyway)."""
    try:
        goaways, how = r.until_closed(POLL_TIMEOUT)
    except AssertionError as e:
        pytest.fail(f"{what}: rsp did not end the connection: {e}")
    errors = [c for c, _ in goaways if c != NO_ERROR]
    if need_goaway:
        assert errors, f"{what}: the connection ended ({how}) without a GOAWAY carrying an error; {r.describe()}"
    for code in errors:
        assert code in codes, (f"{what}: GOAWAY {error_name(code)}, expected one of "
                               f"{[error_name(c) for c in codes]}; {r.describe()}")


# -- ALPN, and where HTTP/2 is not spoken -------------------------------------------------


@pytest.mark.parametrize("offered, selected", [
    (["h2", "http/1.1"], "h2"),
    (["http/1.1", "h2"], "h2"),          # rsp's preference, not the client's order
    (["h2"], "h2"),
    (["http/1.1"], "http/1.1"),
    (None, None),
], ids=["h2-then-http1.1", "http1.1-then-h2", "h2-only", "http1.1-only", "none"])
def test_alpn_offers_h2_then_http11(ka, start_proxy, cert, ca, offered, selected):
    """ALPN on the TLS listener: rsp selects h2 whenever the client offers
    it (whatever the client's order), http/1.1 when only that is offered,
    nothing when nothing is; each connection is then served in the
    protocol selected (HTTP/1.1 without ALPN)."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    context = ca.client_context(alpn=offered)
    if selected == "h2":
        with H2Client(proxy.tls_port, context, WWW, timeout=POLL_TIMEOUT) as c:
            st = c.get("/cl?size=100")
        assert st.status == 200, st
        assert_is_pattern(st.body, 100)
    else:
        r = https_get(proxy.tls_port, "/cl?size=100", context, WWW)
        assert r.alpn == selected, f"offered {offered}, rsp selected {r.alpn!r}"
        assert r.status == 200 and r.version == "HTTP/1.1", f"{r!r} {r.raw[:200]!r}"
        assert_is_pattern(r.body, 100)
    assert [x.version for x in ka.records] == ["HTTP/1.1"]


@pytest.mark.parametrize("offered, selected", [(["h2", "http/1.1"], "http/1.1"), (["h2"], None),
                                               (["http/1.1"], "http/1.1")],
                         ids=["h2-then-http1.1", "h2-only", "http1.1-only"])
def test_http2_false_offers_http11_only(ka, start_proxy, cert, ca, offered, selected):
    """tls.http2 = false: rsp never selects h2 (a client offering only h2
    gets no protocol, and HTTP/1.1 is served on the connection), as before
    this stage."""
    proxy = start_h2(start_proxy, ka, cert=cert, tls={"http2": False})
    r = https_get(proxy.tls_port, "/cl?size=100", ca.client_context(alpn=offered), WWW)
    assert r.alpn == selected, f"offered {offered} with tls.http2 = false, rsp selected {r.alpn!r}"
    assert r.status == 200, f"{r!r} {r.raw[:200]!r}"
    assert_is_pattern(r.body, 100)


def test_plain_listener_has_no_prior_knowledge_h2c(ka, start_proxy, cert):
    """The plain listener speaks HTTP/1.1 only: a client starting with the
    HTTP/2 connection preface (prior knowledge, h2c) gets an HTTP/1.1
    error answer or a closed connection, never a SETTINGS frame, and
    nothing reaches the backend."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with connect(proxy.port, timeout=POLL_TIMEOUT) as sock:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(SETTINGS, 0, 0))
        first = b""
        try:
            while len(first) < 9:
                data = sock.recv(65536)
                if not data:
                    break
                first += data
        except ConnectionResetError:
            pass
    if first:
        assert first.startswith(b"HTTP/1.1 4") or first.startswith(b"HTTP/1.1 5"), \
            f"the plain listener answered the h2 preface with {first[:200]!r}"
    assert ka.requests == 0, f"the preface reached the backend: {ka.records}"
    assert_serves_plain(proxy)


def assert_serves_plain(proxy):
    with Conn(proxy.port, host=WWW) as c:
        r = c.get("/cl?size=100")
    assert r.status == 200 and r.version == "HTTP/1.1", r
    assert_is_pattern(r.body, 100)


def test_plain_listener_ignores_upgrade_to_h2c(ka, start_proxy, cert):
    """An HTTP/1.1 request asking to upgrade to h2c (Upgrade: h2c,
    HTTP2-Settings) is not taken up by rsp: the backend (which ignores the
    Upgrade) answers it in HTTP/1.1, with no 101 Switching Protocols."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with Conn(proxy.port, host=WWW) as c:
        r = c.get("/echo", headers=[("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                                     ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")])
    assert r.status == 200 and r.version == "HTTP/1.1" and not r.interim, f"{r!r} {r.raw[:200]!r}"
    assert r.header("X-Backend") == "ka" and r.json()["target"] == "/echo", r.raw[:300]


# -- config --------------------------------------------------------------------------------

CONFIG_PORT = 18080   # written into configs that rsp -t only reads: never bound
CONFIG_TLS_PORT = 18443


def write_config(rsp, tmp_path, cert, tls_fields=None, **options):
    table = {"listen": CONFIG_TLS_PORT, "certificates": [cert.entry()]}
    table.update(tls_fields or {})
    (path,) = proxy_arguments(rsp.stage, CONFIG_PORT, [(LOOPBACK, 8001)], str(tmp_path),
                              dict(options, tls=table))
    return path


@pytest.mark.parametrize("tls_fields, options", [
    ({"http2": True}, {}), ({"http2": False}, {}), ({}, {"http2_max_streams": 1}),
    ({}, {"http2_max_streams": 512}),
], ids=["http2-true", "http2-false", "max-streams-1", "max-streams-512"])
def test_http2_settings_accepted(rsp, tmp_path, cert, tls_fields, options):
    """tls.http2 (a boolean) and http2_max_streams (a count) are settings
    rsp -t accepts."""
    path = write_config(rsp, tmp_path, cert, tls_fields, **options)
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"rsp -t refused {tls_fields} {options}: {result.stderr!r}"


@pytest.mark.parametrize("tls_fields, options, setting", [
    ({"http2": "yes"}, {}, "tls.http2"),
    ({"http2": 1}, {}, "tls.http2"),
    ({}, {"http2_max_streams": 0}, "http2_max_streams"),
    ({}, {"http2_max_streams": -1}, "http2_max_streams"),
    ({}, {"http2_max_streams": 1.5}, "http2_max_streams"),
    ({}, {"http2_max_streams": "many"}, "http2_max_streams"),
], ids=["http2-string", "http2-number", "max-streams-0", "max-streams-negative", "max-streams-fraction",
        "max-streams-word"])
def test_http2_setting_errors(rsp, tmp_path, cert, tls_fields, options, setting):
    """A tls.http2 that is not a boolean, or an http2_max_streams that is
    not a whole number of at least 1, is refused with one line naming it."""
    path = write_config(rsp, tmp_path, cert, tls_fields, **options)
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, setting, status=1)


# -- requests --------------------------------------------------------------------------------


def test_get_reaches_backend_as_http11(ka, start_proxy, cert, ctx, ctx11):
    """A GET over HTTP/2 reaches the backend as HTTP/1.1 with Host from
    :authority and exactly the fields the same GET over HTTP/1.1 (TLS)
    brings: the client's, X-Forwarded-For, X-Real-IP, X-Forwarded-Proto:
    https, X-Forwarded-Port, X-Forwarded-Host, Forwarded. The answer comes
    back on the stream: status, the backend's fields (no
    connection-specific ones: h2 checks), the body."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    fields = [("user-agent", "fts-h2"), ("accept", "*/*"), ("x-custom", "one, two")]
    with h2(proxy, ctx) as c:
        st = c.get("/echo?x=1&y=%2F", headers=fields)
    assert st.status == 200, st
    assert st.header("x-backend") == "ka"
    seen = st.json()
    assert (seen["method"], seen["target"], seen["version"]) == ("GET", "/echo?x=1&y=%2F", "HTTP/1.1")
    with TLSConn(proxy.tls_port, ctx11, WWW) as c1:
        r = c1.get("/echo?x=1&y=%2F", headers=[("User-Agent", "fts-h2"), ("Accept", "*/*"),
                                                ("X-Custom", "one, two")])
    assert r.status == 200, r
    over_h2, over_h1 = ka.records[0], ka.records[1]
    assert over_h2.header("host") == WWW, over_h2.headers
    for name, want in (("x-forwarded-for", LOOPBACK), ("x-real-ip", LOOPBACK), ("x-forwarded-proto", "https"),
                       ("x-forwarded-port", str(proxy.tls_port)), ("x-forwarded-host", WWW),
                       ("forwarded", f"for={LOOPBACK};proto=https;host={WWW}")):
        assert over_h2.header(name) == want, f"{name}: {over_h2.header(name)!r}, expected {want!r}"
    assert sorted(lowered(over_h2.headers)) == sorted(lowered(over_h1.headers)), (
        f"the backend got other fields over HTTP/2 than over HTTP/1.1:\n  h2:   {over_h2.headers}\n"
        f"  h1.1: {over_h1.headers}")


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_methods_round_trip(ka, start_proxy, cert, ctx, method):
    """Every method reaches the backend as sent, with its body byte for
    byte (methods that usually carry one send 10,000 bytes with a
    content-length); a HEAD's answer has the head and no DATA."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    body = pattern(10_000, offset=7) if method in ("POST", "PUT", "PATCH", "DELETE") else None
    headers = [("content-length", str(len(body)))] if body is not None else []
    with h2(proxy, ctx) as c:
        st = c.wait_ended(c.request(method, "/echo", headers=headers, body=body))
    assert st.status == 200 and st.ended, st
    record = ka.records[0]
    assert (record.method, record.target, record.version) == (method, "/echo", "HTTP/1.1")
    assert record.body == (body or b""), f"the backend got {len(record.body)} body bytes"
    if method == "HEAD":
        assert st.body == b"", f"a HEAD got {len(st.body)} body bytes"
    else:
        assert st.json()["body_sha256"] == hashlib.sha256(body or b"").hexdigest()


@pytest.mark.parametrize("buffering", ["buffered", "streamed"])
def test_body_without_content_length(ka, start_proxy, cert, ctx, rsp, buffering):
    """HTTP/2 needs no content-length: a POST whose body is only framed by
    its DATA frames (60,000 bytes in several) reaches the backend whole
    and framed for HTTP/1.1, whether rsp reads it first
    (request_buffering) or streams it."""
    options = streamed(rsp.stage) if buffering == "streamed" else {}
    proxy = start_h2(start_proxy, ka, cert=cert, **options)
    body = pattern(60_000, offset=11)
    with h2(proxy, ctx) as c:
        st = c.wait_ended(c.request("POST", "/echo", body=body))
    assert st.status == 200, st
    assert st.json()["body_length"] == len(body)
    assert st.json()["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert targets(ka) == ["/echo"]


@pytest.mark.parametrize("window", [None, 16 * KiB], ids=["default-window", "16k-window"])
def test_16mib_both_ways_byte_exact(ka, start_proxy, stage, cert, ctx, window):
    """16 MiB up (a POST, checked by length and SHA-256 at the backend)
    and 16 MiB down (checked byte for byte) on one connection, with the
    client's default stream window and with a 16 KiB one."""
    proxy = start_h2(start_proxy, ka, cert=cert, **large_bodies(stage))
    n = 16 * MiB
    body = pattern(n, offset=5)
    settings = {INITIAL_WINDOW_SIZE: window} if window else None
    with h2(proxy, ctx, settings=settings) as c:
        up = c.wait_ended(c.request("POST", "/echo", headers=[("content-length", str(n))], body=body))
        down = c.get(f"/cl?size={n}")
    assert up.status == 200, up
    assert up.json()["body_length"] == n and up.json()["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert down.status == 200, down
    assert_is_pattern(down.body, n)


def test_100_concurrent_streams_reach_backends_at_once(ka, start_proxy, cert, ctx):
    """100 streams opened at once on one connection all reach the backend
    at the same time (its /barrier answers only when all 100 are waiting
    there), each over HTTP/1.1 with Host from :authority, and each gets
    its own answer."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with h2(proxy, ctx) as c:
        sids = [c.request("GET", f"/barrier?n=100&size={1000 + i}") for i in range(100)]
        streams = c.wait_all(sids)
    for i, st in enumerate(streams):
        assert st.status == 200, f"stream {st.id}: {st!r}"
        assert_is_pattern(st.body, 1000 + i)
    assert len(ka.records) == 100
    assert {(r.version, r.header("host")) for r in ka.records} == {("HTTP/1.1", WWW)}


def test_slow_stream_holds_no_other(gated, start_proxy, cert, ctx):
    """One stream waits on a backend that holds its answer; 99 more on the
    same connection are answered meanwhile, all of them before it (the held
    one is still open when they are done); then it is answered too."""
    proxy = start_h2(start_proxy, gated, cert=cert)
    with h2(proxy, ctx) as c:
        slow = c.request("GET", "/gate?size=5000")
        wait_for(lambda: len(gated.requests_for("/gate")) == 1, "the held request at the backend", POLL_TIMEOUT)
        quick = [c.request("GET", f"/cl?size={100 + i}") for i in range(99)]
        c.wait_all(quick)
        assert not c.streams[slow].done, f"the held stream ended before its backend answered: {c.streams[slow]}"
        for i, sid in enumerate(quick):
            assert c.streams[sid].status == 200, c.streams[sid]
            assert_is_pattern(c.streams[sid].body, 100 + i)
        gated.gate.set()
        st = c.wait_ended(slow)
    assert st.status == 200, st
    assert_is_pattern(st.body, 5000)
    assert all(c.streams[s].order < st.order for s in quick)


def partial_then_wait(conn, backend):
    """A RawBackend handler: to /partial, the head of a 10 MB response and
    its first 10,000 bytes, then nothing until the proxy closes the
    connection ("EOF" recorded then); to anything else, "ok", and the
    connection kept for more."""
    while True:
        head = read_head(conn)
        if not head:
            return
        backend.record(head)
        if b" /partial " in head:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 10000)
            wait_for_eof(conn)
            backend.record(b"EOF")
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


def test_client_reset_aborts_its_exchange(start_proxy, cert, ctx):
    """A stream its client resets (RST_STREAM CANCEL) in the middle of its
    response ends its exchange: the backend connection carrying the rest of
    that response is closed (never pooled with it unread), and the HTTP/2
    connection serves its next stream, over a new backend connection."""
    backend = RawBackend(partial_then_wait)
    try:
        proxy = start_h2(start_proxy, backend, cert=cert)
        with h2(proxy, ctx) as c:
            sid = c.request("GET", "/partial")
            c.wait(lambda: len(c.streams[sid].data) > 0, "the first bytes of /partial")
            c.reset(sid)
            wait_for(lambda: b"EOF" in backend.received, "the backend connection of the reset stream closed",
                     POLL_TIMEOUT)
            st = c.get("/after")
            assert st.status == 200 and st.body == b"ok", st
            assert not c.goaways, c.describe()
        assert backend.connections == 2, f"{backend.connections} backend connections, not 2"
    finally:
        backend.stop()


def test_routing_by_authority(make_keepalive_backend, start_proxy, cert, ctx):
    """Each stream is routed by its own :authority (a connection to one
    site may carry requests for another its certificate covers), with a
    port or without; without :authority, by Host; an unknown name gets
    rsp's own 421, on that stream only."""
    a = make_keepalive_backend("a")
    b = make_keepalive_backend("b")
    proxy = start_h2(start_proxy, cert=cert, sites={A_SITE: [a], B_SITE: [b]})
    with h2(proxy, ctx, server_name=A_SITE) as c:
        cases = [(A_SITE, None, "a"), (B_SITE, None, "b"), (f"{B_SITE}:{proxy.tls_port}", None, "b"),
                 (None, B_SITE, "b"), ("unknown.example.test", None, None)]
        sids = []
        for authority, host, _ in cases:
            fields = [(":method", "GET"), (":scheme", "https"), (":path", "/cl?size=10")]
            if authority is not None:
                fields.append((":authority", authority))
            if host is not None:
                fields.append(("host", host))
            sids.append(c.request(fields=fields))
        streams = c.wait_all(sids)
    for (authority, host, backend), st in zip(cases, streams):
        if backend is None:
            assert st.status == 421, f":authority {authority}: {st!r}"
        else:
            assert st.status == 200 and st.header("x-backend") == backend, \
                f":authority {authority}, host {host}: {st!r} from {st.header('x-backend')}"
    assert [r.header("host") for r in a.records] == [A_SITE]
    assert sorted(r.header("host") for r in b.records) == sorted([B_SITE, f"{B_SITE}:{proxy.tls_port}", B_SITE])


def test_cookie_fields_are_joined(ka, start_proxy, cert, ctx):
    """RFC 9113 section 8.2.3: cookie fields a client split (as HTTP/2
    clients do) reach the HTTP/1.1 backend as one Cookie field, joined by
    "; "."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with h2(proxy, ctx) as c:
        st = c.get("/echo", headers=[("cookie", "a=1"), ("x-other", "x"), ("cookie", "b=2")])
    assert st.status == 200, st
    cookies = [v for n, v in ka.records[0].headers if n.lower() == "cookie"]
    assert cookies == ["a=1; b=2"], f"the backend got Cookie fields {cookies}"


def test_te_trailers_is_allowed(ka, start_proxy, cert, ctx):
    """te: trailers is the one TE an HTTP/2 request may carry (RFC 9113
    section 8.2.2): the request is served."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with h2(proxy, ctx) as c:
        st = c.get("/cl?size=10", headers=[("te", "trailers")])
    assert st.status == 200, st
    assert targets(ka) == ["/cl?size=10"]


def test_access_log_says_http2(ka, start_proxy, cert, ctx, ctx11, tmp_path):
    """The access log has one combined line per stream, its request line
    "GET /p?q=1 HTTP/2.0", beside an HTTP/1.1 request's "HTTP/1.1"."""
    log = tmp_path / "access.log"
    proxy = start_h2(start_proxy, ka, cert=cert, access_log=str(log))
    with h2(proxy, ctx) as c:
        st = c.get("/p?q=1", headers=[("user-agent", "h2-agent"), ("referer", "https://r.example/")])
    assert st.status == 200, st
    https_get(proxy.tls_port, "/p1", ctx11, WWW, headers=[("User-Agent", "h1-agent")])
    lines = wait_lines(str(log), 2)
    assert_line(lines[0], "GET /p?q=1 HTTP/2.0", 200, len(st.body), referer="https://r.example/", agent="h2-agent")
    assert_line(lines[1], "GET /p1 HTTP/1.1", 200, len(b"path=/p1\n"), agent="h1-agent")


REQUEST_TABLE_ROUTE = """
function route(req)
  local names = {}
  for name in pairs(req.headers) do names[#names + 1] = name end
  table.sort(names)
  local lines = { req.method, req.target, req.path, req.query, req.host, req.client, req.version }
  for _, name in ipairs(names) do lines[#lines + 1] = name .. "=" .. req.headers[name] end
  return { status = 200, body = table.concat(lines, "\\n") }
end"""


def test_route_sees_the_same_request(start_proxy, cert, ctx, ctx11):
    """route(req) sees a stream as it sees the same request over HTTP/1.1
    (the request table of test_route.py, sent back by a response table):
    method, target as sent, normalized path, query, host (lowercased, from
    :authority), client, lowercase header names with repeated fields
    joined by ", ", Host among them; only req.version differs: "2.0"."""
    proxy = start_h2(start_proxy, cert=cert, route=REQUEST_TABLE_ROUTE)
    target = "/a/./b/%7e%3f/../c?x=1&y=%41"
    with h2(proxy, ctx, authority="WWW.Example.TEST") as c:
        st = c.get(target, headers=[("x-multi", "one"), ("user-agent", "test"), ("x-multi", "two")])
    with TLSConn(proxy.tls_port, ctx11, WWW, host="WWW.Example.TEST") as c1:
        r = c1.get(target, headers=[("X-Multi", "one"), ("User-Agent", "test"), ("x-multi", "two")])
    assert r.status == 200 and st.status == 200, (r, st)
    over_h1 = r.body.decode().split("\n")
    over_h2 = st.body.decode().split("\n")
    assert over_h1[6] == "1.1" and over_h2[6] == "2.0", (over_h1, over_h2)
    assert over_h2[:6] + over_h2[7:] == over_h1[:6] + over_h1[7:], (
        f"route saw other fields over HTTP/2:\n  h2:   {over_h2}\n  h1.1: {over_h1}")
    assert over_h2[:6] == ["GET", target, "/a/b/c", "x=1&y=%41", WWW, LOOPBACK], over_h2


# (target, header fields): requests rsp's own rules judge (chapters 06, 07, 17)
RULES = [
    ("/a%2Fb", []),                       # an encoded slash: 400
    ("/p#x", []),                         # a fragment: 400
    ("/a/../../b", []),                   # dot segments: normalized
    ("/a%00b", []),                       # passed on as sent
    ("/u", [("x_real_ip", "6.6.6.6")]),   # a name with '_': dropped
]


@pytest.mark.parametrize("target, fields", RULES, ids=["encoded-slash", "fragment", "dot-segments", "encoded-nul",
                                                       "underscore-header"])
def test_rules_as_for_http11(ka, start_proxy, cert, ctx, ctx11, target, fields):
    """rsp's own rules on a request (encoded slashes, fragments, dot
    segments, names with '_') judge a stream as they judge the same
    request over HTTP/1.1: the same status (a 400 may be RST_STREAM
    PROTOCOL_ERROR), and the backend gets the same request (target and
    fields) or none."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with TLSConn(proxy.tls_port, ctx11, WWW) as c1:
        r = c1.get(target, headers=fields)
    over_h1 = [(x.target, sorted(lowered(x.headers))) for x in ka.records]
    with h2(proxy, ctx) as c:
        st = c.get(target, headers=fields)
    over_h2 = [(x.target, sorted(lowered(x.headers))) for x in ka.records[len(over_h1):]]
    if r.status == 400:  # a stream error says as much in HTTP/2
        assert st.status == 400 or (st.status is None and st.reset == PROTOCOL_ERROR), f"{target}: {st!r}"
    else:
        assert st.status == r.status, f"{target}: {st.status} over HTTP/2, {r.status} over HTTP/1.1"
    assert over_h2 == over_h1, f"{target}: the backend got\n  over HTTP/2:   {over_h2}\n  over HTTP/1.1: {over_h1}"


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "no-content-length"])
def test_max_body_size(ka, start_proxy, cert, ctx, declared):
    """max_body_size = "1k": a 5,000-byte POST gets rsp's 413 on its
    stream (with a content-length saying so, or once its DATA pass the
    limit) and never reaches the backend; the next stream is served."""
    proxy = start_h2(start_proxy, ka, cert=cert, max_body_size="1k")
    body = pattern(5000)
    with h2(proxy, ctx) as c:
        headers = [("content-length", str(len(body)))] if declared else []
        st = c.wait_ended(c.request("POST", "/echo", headers=headers, body=body))
        assert st.status == 413, st
        assert c.get("/cl?size=10").status == 200
    assert targets(ka) == ["/cl?size=10"]


def test_body_timeout_on_one_stream(ka, start_proxy, cert, ctx):
    """body_timeout = 0.5: a POST whose body stops half way gets 408 (or
    RST_STREAM) on its stream within 10 s, while a GET on the same
    connection is answered meanwhile; the connection then serves a new
    stream, and the stalled request never reaches the backend."""
    proxy = start_h2(start_proxy, ka, cert=cert, body_timeout=SHORT_TIMEOUT)
    with h2(proxy, ctx) as c:
        stalled = c.request("POST", "/echo", headers=[("content-length", "10")], end_stream=False)
        c.send_data(stalled, b"hello")
        other = c.get("/cl?size=10")
        assert other.status == 200 and not c.streams[stalled].done, (other, c.streams[stalled])
        st = c.wait_ended(stalled, FIRED_BY)
        assert st.status == 408 or (st.status is None and st.reset is not None), st
        assert c.get("/cl?size=20").status == 200
    assert targets(ka) == ["/cl?size=10", "/cl?size=20"]


# -- flow control as backpressure --------------------------------------------------------------


def test_stream_not_read_costs_bounded_memory(make_backend, start_proxy, cert, ctx, rsp):
    """A client with a 16 KiB stream window stops reading one stream of a
    50 MiB response (it keeps reading the connection): another stream on
    the connection is answered in full meanwhile, the stalled one never
    gets more than its window, rsp's resident memory grows by less than
    16 MiB while it stays stalled (response_buffering off: the backend is
    held back, not read into memory), and once the client reads again all
    50 MiB arrive byte for byte."""
    backend = make_backend("a")
    proxy = start_h2(start_proxy, backend, cert=cert, **unbuffered(rsp.stage))
    n = 50 * MiB
    window = 16 * KiB
    with h2(proxy, ctx, settings={INITIAL_WINDOW_SIZE: window}) as c:
        assert c.get("/bytes?n=1000").status == 200  # the connection's own memory is in the baseline
        before = vm_rss(proxy.pid)
        stalled = c.request("GET", f"/bytes?n={n}")
        c.pause(stalled)
        c.wait(lambda: len(c.streams[stalled].data) >= window, "the stalled stream's first window of data")
        other = c.get(f"/bytes?n={MiB}")
        assert other.status == 200, other
        assert_is_pattern(other.body, MiB)
        during = max_rss_while_reading(proxy.pid, c, PAUSE)
        got = len(c.streams[stalled].data)
        assert got <= window, f"rsp sent {got} bytes on a stream whose window was {window}"
        assert not c.streams[stalled].done
        c.resume(stalled)
        st = c.wait_ended(stalled, timeout=120)
    assert_rss_bounded(proxy, before, during, "a 50 MiB stream its client does not read")
    assert st.status == 200, st
    assert_is_pattern(st.body, n)


def test_upload_to_slow_backend_costs_bounded_memory(make_backend, start_proxy, cert, ctx, rsp):
    """A 64 MiB upload (request_buffering off) to a backend that waits
    before reading costs rsp less than 16 MiB of resident memory while it
    waits (rsp opens the client's window only as the backend drains: the
    client cannot send it all meanwhile), and then the backend gets every byte (length and SHA-256)."""
    backend = make_backend("a")
    proxy = start_h2(start_proxy, backend, cert=cert, **streamed(rsp.stage), **large_bodies(rsp.stage))
    n = 64 * MiB
    body = pattern(n, offset=3)
    with h2(proxy, ctx) as c:
        assert c.get("/bytes?n=1000").status == 200
        before = vm_rss(proxy.pid)
        sid = c.request("POST", f"/upload?delay={PAUSE + 0.5}&patience=5", body=body,
                        headers=[("content-length", str(n))])
        during = max_rss_while_reading(proxy.pid, c, PAUSE)
        unsent = c.unsent(sid)
        st = c.wait_ended(sid, timeout=120)
    assert_rss_bounded(proxy, before, during, "a 64 MiB upload to a backend that waits")
    assert unsent > 0, "rsp took the whole 64 MiB body while the backend read none of it"
    assert st.status == 200, st
    assert st.json() == {"received": n, "sha256": hashlib.sha256(body).hexdigest()}


def test_zero_window_stall_is_ended_by_a_timeout(ka, start_proxy, cert, ctx):
    """A client that sets its stream window to 0 and never opens it gets
    no DATA (h2 would refuse any); with idle_timeout and keepalive_timeout
    at half a second, rsp ends that connection (within 10 s) and other
    clients are served."""
    proxy = start_h2(start_proxy, ka, cert=cert, idle_timeout=SHORT_TIMEOUT, keepalive_timeout=SHORT_TIMEOUT)
    with h2(proxy, ctx, settings={INITIAL_WINDOW_SIZE: 0}) as c:
        sid = c.request("GET", "/cl?size=100000")
        how = c.wait_closed(FIRED_BY)
        assert how in ("eof", "reset") or how.startswith("TLS error"), how
        assert len(c.streams[sid].data) == 0, f"rsp sent {len(c.streams[sid].data)} bytes into a zero window"
    assert_others_served(proxy, ctx)


def test_idle_connection_gets_goaway_after_keepalive_timeout(ka, start_proxy, cert, ctx):
    """An HTTP/2 connection with no stream open for keepalive_timeout gets
    a GOAWAY (NO_ERROR, its last stream id covering the stream it
    carried) and is closed, as an idle HTTP/1.1 connection is closed (RFC
    9113 section 9.1: the client knows not to use it again)."""
    proxy = start_h2(start_proxy, ka, cert=cert, keepalive_timeout=SHORT_TIMEOUT)
    with h2(proxy, ctx) as c:
        st = c.get("/cl?size=10")
        assert st.status == 200, st
        c.wait_closed(FIRED_BY)
        assert c.goaways and all(code == NO_ERROR for code, _, _ in c.goaways), c.describe()
        assert c.goaways[-1][1] >= 1, f"the last GOAWAY does not cover stream 1: {c.describe()}"
    assert_others_served(proxy, ctx)


# -- concurrency limit ----------------------------------------------------------------------


def test_max_streams_advertised_by_default(ka, start_proxy, cert, ctx):
    """rsp's SETTINGS say SETTINGS_MAX_CONCURRENT_STREAMS 128 (the default
    of http2_max_streams)."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with raw(proxy, ctx) as r:
        assert r.server_settings.get(MAX_CONCURRENT_STREAMS) == DEFAULT_MAX_STREAMS, r.server_settings


def test_max_streams_enforced(gated, start_proxy, cert, ctx):
    """With http2_max_streams = 4 rsp advertises 4. With four streams held
    at the backend, a fifth from a client that has acknowledged that limit
    never reaches the backend: it is refused alone (RST_STREAM
    REFUSED_STREAM or PROTOCOL_ERROR, RFC 9113 section 5.1.2), or, as
    libnghttp2 does once its SETTINGS are acknowledged, the connection ends
    with GOAWAY PROTOCOL_ERROR whose last stream is the fourth (chapter 20
    says where rsp differs from the RFC here). When the fifth is refused
    alone, the four are then answered and the connection takes a new
    stream. Either way another client is served."""
    proxy = start_h2(start_proxy, gated, cert=cert, http2_max_streams=4)
    with raw(proxy, ctx) as r:
        assert r.server_settings.get(MAX_CONCURRENT_STREAMS) == 4, r.server_settings
        held = [1, 3, 5, 7]
        r.send(*[r.request_frames(sid, "GET", f"/gate?size=100&s={sid}") for sid in held])
        wait_for(lambda: len(gated.requests_for("/gate")) == 4, "four held requests at the backend", POLL_TIMEOUT)
        r.send(r.request_frames(9, "GET", "/gate?size=100&s=9"))
        fifth = r.collect([9])[9]
        if r.goaways:
            assert [tuple(g[:2]) for g in r.goaways] == [(PROTOCOL_ERROR, 7)], r.describe()
            assert fifth.status is None, f"the fifth stream: {fifth!r}; {r.describe()}"
        else:
            assert fifth.reset in (REFUSED_STREAM, PROTOCOL_ERROR) and fifth.status is None, (
                f"the fifth stream: {fifth!r}; {r.describe()}")
            gated.gate.set()
            got = r.collect(held)
            for sid in held:
                assert got[sid].status == 200 and got[sid].ended, got[sid]
            r.send(r.request_frames(11, "GET", "/cl?size=10"))
            assert r.collect([11])[11].status == 200, r.describe()
            assert not r.goaways, r.describe()
    gated.gate.set()
    assert_others_served(proxy, ctx)
    assert sorted(t for t in targets(gated) if t.startswith("/gate")) == sorted(
        f"/gate?size=100&s={sid}" for sid in held)


# -- malformed requests ---------------------------------------------------------------------

BAD = "/malformed"   # the path of every malformed request: the backend must never see it
GOOD_PSEUDO = [(":method", "GET"), (":scheme", "https"), (":path", BAD), (":authority", WWW)]

# (id, the header fields of the request in order, its body (None: END_STREAM on HEADERS))
MALFORMED = [
    ("connection", GOOD_PSEUDO + [("connection", "keep-alive")], None),
    ("connection-close", GOOD_PSEUDO + [("connection", "close")], None),
    ("transfer-encoding", [(":method", "POST"), (":scheme", "https"), (":path", BAD), (":authority", WWW),
                           ("transfer-encoding", "chunked")],
     b"5\r\nhello\r\n0\r\n\r\n"),
    ("keep-alive", GOOD_PSEUDO + [("keep-alive", "timeout=5")], None),
    ("upgrade", GOOD_PSEUDO + [("upgrade", "websocket")], None),
    ("proxy-connection", GOOD_PSEUDO + [("proxy-connection", "keep-alive")], None),
    ("te-gzip", GOOD_PSEUDO + [("te", "gzip")], None),
    ("te-trailers-and-more", GOOD_PSEUDO + [("te", "trailers, deflate")], None),
    ("uppercase-name", GOOD_PSEUDO + [("X-Upper", "1")], None),
    ("uppercase-host", [(":method", "GET"), (":scheme", "https"), (":path", BAD), ("Host", WWW)], None),
    ("cr-in-value", GOOD_PSEUDO + [("x-a", "a\rb")], None),
    ("lf-in-value", GOOD_PSEUDO + [("x-a", "a\nb")], None),
    ("crlf-injection", GOOD_PSEUDO + [("x-a", "a\r\nx-injected: 1")], None),
    ("nul-in-value", GOOD_PSEUDO + [("x-a", "a\x00b")], None),
    ("cr-in-name", GOOD_PSEUDO + [("x-a\rb", "1")], None),
    ("lf-in-name", GOOD_PSEUDO + [("x-a\nb", "1")], None),
    ("nul-in-name", GOOD_PSEUDO + [("x-a\x00b", "1")], None),
    ("space-in-name", GOOD_PSEUDO + [("x a", "1")], None),
    ("value-leading-space", GOOD_PSEUDO + [("x-a", " 1")], None),
    ("value-trailing-tab", GOOD_PSEUDO + [("x-a", "1\t")], None),
    ("cr-in-path", [(":method", "GET"), (":scheme", "https"), (":path", BAD + "\r\nx: 1"), (":authority", WWW)],
     None),
    ("missing-method", [(":scheme", "https"), (":path", BAD), (":authority", WWW)], None),
    ("missing-scheme", [(":method", "GET"), (":path", BAD), (":authority", WWW)], None),
    ("missing-path", [(":method", "GET"), (":scheme", "https"), (":authority", WWW)], None),
    ("empty-path", [(":method", "GET"), (":scheme", "https"), (":path", ""), (":authority", WWW)], None),
    ("repeated-path", GOOD_PSEUDO + [(":path", "/other")], None),
    ("repeated-method", [(":method", "GET"), (":method", "POST")] + GOOD_PSEUDO[1:], None),
    ("pseudo-after-regular", [(":method", "GET"), (":scheme", "https"), ("x-a", "1"), (":path", BAD),
                              (":authority", WWW)], None),
    ("unknown-pseudo", GOOD_PSEUDO + [(":foo", "bar")], None),
    ("status-in-request", GOOD_PSEUDO + [(":status", "200")], None),
    ("authority-with-userinfo", [(":method", "GET"), (":scheme", "https"), (":path", BAD),
                                 (":authority", f"user@{WWW}")], None),
    ("authority-against-host", GOOD_PSEUDO + [("host", "other.example.test")], None),
    ("content-length-over-data", [(":method", "POST"), (":scheme", "https"), (":path", BAD), (":authority", WWW),
                                  ("content-length", "10")], b"hello"),
    ("content-length-under-data", [(":method", "POST"), (":scheme", "https"), (":path", BAD),
                                   (":authority", WWW), ("content-length", "2")], b"hello"),
    ("content-length-without-data", [(":method", "POST"), (":scheme", "https"), (":path", BAD),
                                     (":authority", WWW), ("content-length", "5")], None),
    ("content-length-not-a-number", [(":method", "POST"), (":scheme", "https"), (":path", BAD),
                                     (":authority", WWW), ("content-length", "5x")], b"hello"),
    ("content-lengths-differ", [(":method", "POST"), (":scheme", "https"), (":path", BAD), (":authority", WWW),
                                ("content-length", "5"), ("content-length", "6")], b"hello"),
]


@pytest.mark.parametrize("fields, body", [pytest.param(f, b, id=name) for name, f, b in MALFORMED])
def test_malformed_request_is_a_stream_error(ka, start_proxy, cert, ctx, fields, body):
    """A malformed request (RFC 9113 sections 8.1.1, 8.2, 8.3) between two
    good ones on one connection gets RST_STREAM PROTOCOL_ERROR or a 400 on
    its stream, and nothing of it reaches the backend; the good ones are
    answered (the connection goes on, no GOAWAY), and so are other
    clients."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with raw(proxy, ctx) as r:
        r.send(r.request_frames(1, "GET", "/before"))
        block = r.encode(fields)
        bad = r.headers_frames(3, block, end_stream=body is None)
        if body is not None:
            bad += frame(DATA, END_STREAM, 3, body)
        r.send(bad)
        r.send(r.request_frames(5, "GET", "/after"))
        got = r.collect([1, 3, 5])
        assert got[3].reset == PROTOCOL_ERROR or (got[3].status == 400 and got[3].ended), (
            f"the malformed request got {got[3]!r}, not RST_STREAM PROTOCOL_ERROR or a 400; {r.describe()}")
        for sid, path in ((1, "/before"), (5, "/after")):
            assert got[sid].status == 200 and got[sid].body == f"path={path}\n".encode(), (
                f"the good request {path} on the same connection: {got[sid]!r}; {r.describe()}")
        assert not r.goaways, f"a malformed request ended the connection; {r.describe()}"
    assert sorted(targets(ka)) == ["/after", "/before"], f"the backend got {targets(ka)}"
    assert_others_served(proxy, ctx)


@pytest.mark.parametrize("buffering", ["buffered", "streamed"])
def test_content_length_cannot_smuggle(ka, start_proxy, cert, ctx, rsp, buffering):
    """A POST saying content-length: 5 whose DATA carry 5 bytes and then a
    whole HTTP/1.1 request gets a stream error or a 400, and the request
    hidden in its DATA never reaches the backend (whether rsp reads the
    body first or streams it): the requests after it, on the same
    connection and on another, get their own answers."""
    options = streamed(rsp.stage) if buffering == "streamed" else {}
    proxy = start_h2(start_proxy, ka, cert=cert, backend_keepalive=4, **options)
    hidden = f"GET /smuggled HTTP/1.1\r\nHost: {WWW}\r\n\r\n".encode()
    with raw(proxy, ctx) as r:
        fields = [(":method", "POST"), (":scheme", "https"), (":path", "/echo"), (":authority", WWW),
                  ("content-length", "5")]
        r.send(r.headers_frames(1, r.encode(fields), end_stream=False))
        r.send(frame(DATA, 0, 1, b"hello"), frame(DATA, END_STREAM, 1, hidden))
        r.collect([1])
        r.send(r.request_frames(3, "GET", "/after-on-same"))
        assert r.collect([3])[3].body == b"path=/after-on-same\n", r.describe()
        # Streamed, the backend may have answered the first 5 bytes before
        # the rest came: then the stream error follows the answer, and has
        # come by the time the next stream (sent after the DATA) is answered.
        first = r.streams[1]
        assert first.reset is not None or first.status == 400, (
            f"a body longer than its content-length was accepted: {first!r}; {r.describe()}")
    with h2(proxy, ctx) as c:
        assert c.get("/after-on-another").body == b"path=/after-on-another\n"
    assert "/smuggled" not in targets(ka), f"a request hidden in DATA reached the backend: {targets(ka)}"
    for record in ka.records:
        if record.target == "/echo":
            assert len(record.body) <= 5, f"the backend got {len(record.body)} body bytes for content-length 5"


@pytest.mark.parametrize("buffering", ["buffered", "streamed"])
def test_body_that_looks_like_chunks_stays_a_body(ka, start_proxy, cert, ctx, rsp, buffering):
    """A POST without content-length whose DATA hold a chunked terminator
    and a request ("0\\r\\n\\r\\nGET /smuggled ...") reaches the backend as
    exactly that body, and /smuggled never reaches it as a request."""
    options = streamed(rsp.stage) if buffering == "streamed" else {}
    proxy = start_h2(start_proxy, ka, cert=cert, **options)
    body = f"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: {WWW}\r\n\r\n".encode()
    with h2(proxy, ctx) as c:
        st = c.wait_ended(c.request("POST", "/echo", body=body))
        after = c.get("/after")
    assert st.status == 200, st
    assert st.json()["body_length"] == len(body) and st.json()["body"] == body.decode("latin-1")
    assert after.body == b"path=/after\n"
    assert "/smuggled" not in targets(ka), f"the body was taken for a request: {targets(ka)}"


# -- header limits ----------------------------------------------------------------------------


def _many_fields(r):
    return r.encode(GOOD_PSEUDO + [(f"x-f{i}", "1") for i in range(101)])


def _huge_value(r):
    return r.encode(GOOD_PSEUDO + [("x-big", "v" * 40_000)])


@pytest.mark.parametrize("make_block", [_many_fields, _huge_value], ids=["101-fields", "40k-value"])
def test_header_limits_as_for_http11(ka, start_proxy, cert, ctx, make_block):
    """A request over HTTP/1.1's limits (more than 100 fields; a head
    larger than max_request_head, 32 KiB, here one 40 KB value sent in
    HEADERS + CONTINUATION) gets 431 or RST_STREAM on its stream, never
    reaches the backend, and the connection serves the next stream."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with raw(proxy, ctx) as r:
        r.send(r.headers_frames(1, make_block(r)))
        first = r.collect([1])[1]
        assert first.status == 431 or (first.status is None and first.reset is not None), (
            f"an oversized request got {first!r}; {r.describe()}")
        r.send(r.request_frames(3, "GET", "/after"))
        assert r.collect([3])[3].status == 200, r.describe()
    assert targets(ka) == ["/after"]


def test_request_the_session_refuses_is_logged_and_counted(ka, start_proxy, cert, ctx, tmp_path):
    """A request over the header limits, which the HTTP/2 session answers
    with 431 itself before any exchange sees it, still has its access log
    line (the request line unknown: "-") and counts in requests_total and
    as an HTTP/2 request, as an HTTP/1.1 request refused with 431 does."""
    log = tmp_path / "access.log"
    proxy = with_status(start_proxy, ka, cert=cert, access_log=str(log))
    with raw(proxy, ctx) as r:
        r.send(r.headers_frames(1, _many_fields(r)))
        assert r.collect([1])[1].status == 431, r.describe()
    line = wait_lines(str(log), 1)[0]
    fields = parse_line(line)
    assert fields["request"] == "-" and int(fields["status"]) == 431, line
    doc = wait_status(proxy, lambda d: d.get("requests_by_protocol") == {"http1": 0, "http2": 1},
                      "requests_by_protocol {http1: 0, http2: 1}")
    assert doc["requests_total"] == 1, doc
    assert targets(ka) == []


# -- floods ---------------------------------------------------------------------------------


def _frames_in_batches(make, total, batch=BATCH):
    """`total` frames from make(i) (bytes), joined in batches of `batch`."""
    for start in range(0, total, batch):
        yield b"".join(make(i) for i in range(start, min(total, start + batch)))


def test_rapid_reset_flood(ka, start_proxy, cert, ctx):
    """Rapid reset (CVE-2023-44487): a client opening streams and
    resetting each at once (HEADERS + RST_STREAM CANCEL, up to 10,000
    times, reading between batches) gets a GOAWAY ENHANCE_YOUR_CALM or
    PROTOCOL_ERROR and its connection closed (keepalive_requests is set
    far above the flood: no request-count limit ends it first); rsp lives
    and serves other clients."""
    proxy = start_h2(start_proxy, ka, cert=cert, keepalive_requests=1_000_000)
    with raw(proxy, ctx) as r:
        block = r.request_block("GET", "/cl?size=10")
        later = r.request_block("GET", "/cl?size=10")  # indexed from now on: the same bytes every time

        def make(i):
            sid = 1 + 2 * i
            return (r.headers_frames(sid, block if i == 0 else later)
                    + frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL)))
        r.flood(_frames_in_batches(make, FLOOD_FRAMES))
        assert_flood_ended(r, FLOOD_CODES, "rapid reset")
    assert_others_served(proxy, ctx)


@pytest.mark.parametrize("trigger", ["zero-window-update", "malformed-request"])
def test_made_you_reset_flood(ka, start_proxy, cert, ctx, trigger):
    """MadeYouReset (CVE-2025-8671): a client that makes rsp reset its
    streams, up to 10,000 times: a POST's HEADERS, then a WINDOW_UPDATE of
    0 on that stream (an error rsp may treat as the stream's or the
    connection's), or a request with an uppercase field name (a stream
    error each time: RST_STREAM). The client gets a GOAWAY
    ENHANCE_YOUR_CALM or PROTOCOL_ERROR and its connection closed, nothing
    reaches the backend, rsp serves other clients."""
    proxy = start_h2(start_proxy, ka, cert=cert, keepalive_requests=1_000_000)
    with raw(proxy, ctx) as r:
        if trigger == "zero-window-update":
            fields = request_headers("POST", "/echo", WWW)
        else:
            fields = request_headers("GET", BAD, WWW, extra=[("X-Upper", "1")])
        block, later = r.encode(fields), r.encode(fields)  # later: indexed, the same bytes every time

        def make(i):
            sid = 1 + 2 * i
            if trigger == "zero-window-update":
                return (r.headers_frames(sid, block if i == 0 else later, end_stream=False)
                        + frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", 0)))
            return r.headers_frames(sid, block if i == 0 else later)
        r.flood(_frames_in_batches(make, FLOOD_FRAMES))
        assert_flood_ended(r, FLOOD_CODES, f"MadeYouReset ({trigger})")
    assert ka.requests == 0, targets(ka)[:5]
    assert_others_served(proxy, ctx)


def test_continuation_flood(ka, start_proxy, cert, ctx):
    """A header block that never ends (CVE-2024-27316 and kin): HEADERS
    without END_HEADERS, then CONTINUATION frames of 1 KB each (valid
    HPACK), up to 10,000 (10 MB): rsp ends the connection with a GOAWAY
    (ENHANCE_YOUR_CALM, PROTOCOL_ERROR or COMPRESSION_ERROR) long before,
    its memory grows by less than 16 MiB, nothing reaches the backend,
    other clients are served."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    before = vm_rss(proxy.pid)
    with raw(proxy, ctx) as r:
        pad = hpack_literal("x-pad", "a" * 1000)

        def batches():
            yield frame(HEADERS, END_STREAM, 1, static_request_block(WWW))
            yield from _frames_in_batches(lambda i: frame(CONTINUATION, 0, 1, pad), FLOOD_FRAMES)
        r.flood(batches())
        assert_flood_ended(r, HEADER_FLOOD_CODES, "CONTINUATION flood")
    assert_rss_bounded(proxy, before, vm_rss(proxy.pid), "a CONTINUATION flood")
    assert ka.requests == 0, targets(ka)
    assert_others_served(proxy, ctx)


@pytest.mark.parametrize("kind", ["ping", "settings"])
def test_unanswered_control_frame_flood(ka, start_proxy, cert, ctx, kind):
    """A client sending PINGs (or SETTINGS), up to 50,000, and reading
    none of the acknowledgements (its receive buffer is 4 KiB; CVE-2019-9512,
    CVE-2019-9515) gets its connection ended (any GOAWAY ENHANCE_YOUR_CALM
    or PROTOCOL_ERROR), and rsp's memory grows by less than 16 MiB; other
    clients are served."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    before = vm_rss(proxy.pid)
    one = (frame(PING, 0, 0, b"fts-ping") if kind == "ping"
           else frame(SETTINGS, 0, 0, settings_payload({ENABLE_PUSH: 0})))
    with raw(proxy, ctx, rcvbuf=4096) as r:
        try:
            r.flood(_frames_in_batches(lambda i: one, UNREAD_FLOOD_FRAMES), read=False)
        except socket.timeout:
            pass  # rsp stopped reading: it must still end the connection, below
        assert_flood_ended(r, FLOOD_CODES, f"{kind} flood", need_goaway=False)
    assert_rss_bounded(proxy, before, vm_rss(proxy.pid), f"a {kind} flood")
    assert_others_served(proxy, ctx)


def test_priority_flood(ka, start_proxy, cert, ctx):
    """PRIORITY frames on ever new idle streams (CVE-2019-9513), up to
    10,000, from a client that reads: a GOAWAY ENHANCE_YOUR_CALM or
    PROTOCOL_ERROR and the connection closed; other clients served."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with raw(proxy, ctx) as r:
        r.flood(_frames_in_batches(lambda i: frame(PRIORITY, 0, 1 + 2 * i, struct.pack(">IB", 0, 15)),
                                   FLOOD_FRAMES))
        assert_flood_ended(r, FLOOD_CODES, "PRIORITY flood")
    assert_others_served(proxy, ctx)


def test_empty_data_flood(ka, start_proxy, cert, ctx):
    """Empty DATA frames without END_STREAM on an open request
    (CVE-2019-9518), up to 10,000: a GOAWAY ENHANCE_YOUR_CALM or
    PROTOCOL_ERROR and the connection closed; the request, whose body
    never ends, never reaches the backend (request_buffering is on); other
    clients served."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    with raw(proxy, ctx) as r:
        def batches():
            yield r.headers_frames(1, r.request_block("POST", "/echo"), end_stream=False)
            yield from _frames_in_batches(lambda i: frame(DATA, 0, 1), FLOOD_FRAMES)
        r.flood(batches())
        assert_flood_ended(r, FLOOD_CODES, "empty DATA flood")
    assert ka.requests == 0, targets(ka)
    assert_others_served(proxy, ctx)


def _bomb_entry(r):
    """(name, value) of a field as large as rsp's HPACK table takes."""
    size = r.server_settings.get(HEADER_TABLE_SIZE, 4096)
    return "x-bomb", "b" * max(1, size - 32 - len("x-bomb") - 16)


@pytest.mark.parametrize("kind", ["big-entry", "many-fields"])
def test_hpack_bomb(ka, start_proxy, cert, ctx, kind):
    """HPACK bombs (CVE-2016-6581): one field enters rsp's dynamic table
    and each header block then names it by index over and over, 1 byte
    each: a big field 1,000 times per request (about 4 MB decoded), or an
    empty one 10,000 times (10,000 fields; the 32-byte entry overhead
    makes them 330 KB). Stream after stream of these (up to 1,000): no
    request reaches the backend, no stream gets a 2xx, rsp's memory grows
    by less than 16 MiB, the connection ends with a GOAWAY
    (ENHANCE_YOUR_CALM, PROTOCOL_ERROR or COMPRESSION_ERROR), and other
    clients are served."""
    proxy = start_h2(start_proxy, ka, cert=cert)
    before = vm_rss(proxy.pid)
    with raw(proxy, ctx) as r:
        name, value = _bomb_entry(r) if kind == "big-entry" else ("x-f", "")
        repeats = 1000 if kind == "big-entry" else 10_000
        refs = hpack_indexed(62) * repeats  # 62: the newest entry of the dynamic table

        def make(i):
            sid = 1 + 2 * i
            head = static_request_block(WWW, path=b"/bomb")
            if i == 0:
                head += hpack_literal(name, value, indexing=True)
            return r.headers_frames(sid, head + refs)
        r.flood(_frames_in_batches(make, 1000, batch=10))
        assert_flood_ended(r, HEADER_FLOOD_CODES, f"HPACK bomb ({kind})")
        answered = [st for st in r.streams.values() if st.status is not None]
        assert all(st.status >= 400 for st in answered), f"a bomb was answered: {answered[:5]}"
    assert_rss_bounded(proxy, before, vm_rss(proxy.pid), f"HPACK bombs ({kind})")
    assert ka.requests == 0, f"a bomb reached the backend: {targets(ka)[:5]}"
    assert_others_served(proxy, ctx)


# -- reloads, shutdown, status --------------------------------------------------------------


def test_sighup_sends_goaway_and_lets_stream_finish(gated, start_proxy, cert, ctx):
    """SIGHUP with a stream in flight: rsp sends a GOAWAY (NO_ERROR, its
    last stream id covering the stream), the stream is answered in full
    once its backend answers, then the connection ends; a new connection
    is served by the reloaded config."""
    proxy = start_h2(start_proxy, gated, cert=cert)
    with h2(proxy, ctx) as c:
        sid = c.request("GET", "/gate?size=20000")
        wait_for(lambda: len(gated.requests_for("/gate")) == 1, "the held request at the backend", POLL_TIMEOUT)
        sighup(proxy, 2)
        c.wait(lambda: c.goaways, "a GOAWAY after SIGHUP")
        assert not c.streams[sid].done, c.describe()
        gated.gate.set()
        st = c.wait_ended(sid)
        assert st.status == 200, st
        assert_is_pattern(st.body, 20000)
        c.wait_closed(POLL_TIMEOUT)
        assert all(code == NO_ERROR for code, _, _ in c.goaways), c.describe()
        assert c.goaways[-1][1] >= sid, f"the last GOAWAY does not cover stream {sid}: {c.describe()}"
    assert_h2_serves(proxy, ctx)


def test_sigterm_sends_goaway_and_lets_stream_finish(gated, start_proxy, cert, ctx):
    """SIGTERM with a stream in flight and an idle HTTP/2 connection:
    both get a GOAWAY (NO_ERROR), the idle one is closed, the stream is
    answered in full once its backend answers, its connection then ends
    and rsp exits with status 0."""
    proxy = start_h2(start_proxy, gated, cert=cert)
    with h2(proxy, ctx) as busy, h2(proxy, ctx) as idle:
        assert idle.get("/cl?size=10").status == 200
        sid = busy.request("GET", "/gate?size=20000")
        wait_for(lambda: len(gated.requests_for("/gate")) == 1, "the held request at the backend", POLL_TIMEOUT)
        proxy.process.send_signal(signal.SIGTERM)
        busy.wait(lambda: busy.goaways, "a GOAWAY after SIGTERM")
        idle.wait_closed(POLL_TIMEOUT)
        assert idle.goaways and all(code == NO_ERROR for code, _, _ in idle.goaways), idle.describe()
        assert not busy.streams[sid].done, busy.describe()
        gated.gate.set()
        st = busy.wait_ended(sid)
        assert st.status == 200, st
        assert_is_pattern(st.body, 20000)
        busy.wait_closed(POLL_TIMEOUT)
        assert all(code == NO_ERROR for code, _, _ in busy.goaways), busy.describe()
    assert proxy.wait_exit(POLL_TIMEOUT) == 0


def open_http2(doc):
    """(connections, streams) of status.json's "http2" object."""
    figures = doc.get("http2") or {}
    return figures.get("connections"), figures.get("streams")


def test_status_counts_http2(gated, start_proxy, cert, ctx, ctx11):
    """status.json's requests_by_protocol counts responses by protocol
    ({"http1": N, "http2": N}, adding up to requests_total) and its
    "http2" object the open HTTP/2 connections and streams; /metrics says
    the same in rsp_requests_by_protocol_total{protocol}, rsp_http2_connections
    and rsp_http2_streams. Two HTTP/1.1 requests (plain and TLS) and
    three over HTTP/2, then two HTTP/2 connections held open, one with a
    stream held at the backend."""
    proxy = with_status(start_proxy, gated, cert=cert)
    with Conn(proxy.port, host=WWW) as plain:
        assert plain.get("/cl?size=10").status == 200
    assert https_get(proxy.tls_port, "/cl?size=10", ctx11, WWW).status == 200
    with h2(proxy, ctx) as c:
        for _ in range(3):
            assert c.get("/cl?size=10").status == 200
    doc = wait_status(proxy, lambda d: d.get("requests_by_protocol") == {"http1": 2, "http2": 3},
                      "requests_by_protocol {http1: 2, http2: 3}")
    assert doc["requests_total"] == 5
    families = metrics(proxy)
    assert metric_value(families, "rsp_requests_by_protocol_total", protocol="http1") == 2
    assert metric_value(families, "rsp_requests_by_protocol_total", protocol="http2") == 3
    assert families["rsp_requests_by_protocol_total"]["type"] == "counter"
    with h2(proxy, ctx) as busy, h2(proxy, ctx) as idle:
        assert idle.get("/cl?size=10").status == 200
        sid = busy.request("GET", "/gate?size=10")
        wait_for(lambda: len(gated.requests_for("/gate")) == 1, "the held request at the backend", POLL_TIMEOUT)
        wait_status(proxy, lambda d: open_http2(d) == (2, 1), "http2 connections 2, streams 1")
        families = metrics(proxy)
        assert metric_value(families, "rsp_http2_connections") == 2
        assert metric_value(families, "rsp_http2_streams") == 1
        assert families["rsp_http2_connections"]["type"] == "gauge"
        assert families["rsp_http2_streams"]["type"] == "gauge"
        gated.gate.set()
        assert busy.wait_ended(sid).status == 200
    doc = wait_status(proxy, lambda d: open_http2(d) == (0, 0), "http2 connections 0, streams 0")
    assert doc["requests_by_protocol"] == {"http1": 2, "http2": 5}, doc["requests_by_protocol"]
    families = metrics(proxy)
    assert metric_value(families, "rsp_http2_connections") == 0
    assert metric_value(families, "rsp_http2_streams") == 0


# -- real clients ---------------------------------------------------------------------------


def test_h2load_smoke(ka, start_proxy, cert):
    """h2load -n 2000 -c 10 -m 10 (10 connections, 10 streams at once on
    each) over TLS: the protocol is h2 and all 2,000 requests succeed with
    a 2xx; the backend got 2,000."""
    h2load = shutil.which("h2load")
    if h2load is None:
        pytest.skip("h2load is not installed (nghttp2-client; ./setup-env.sh installs it)")
    proxy = start_h2(start_proxy, ka, cert=cert)
    result = subprocess.run([h2load, "-n", "2000", "-c", "10", "-m", "10", "-H", f":authority: {WWW}",
                             f"https://{LOOPBACK}:{proxy.tls_port}/cl?size=1000"],
                            capture_output=True, text=True, timeout=120)
    out = result.stdout
    assert result.returncode == 0, f"h2load failed ({result.returncode}):\n{out}\n{result.stderr}"
    assert re.search(r"Application protocol: h2\b", out), out
    assert re.search(r"requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored", out), out
    assert re.search(r"status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx", out), out
    assert ka.requests == 2000


def test_curl_http2(ka, start_proxy, cert, ca, tmp_path):
    """curl --http2 (checking the certificate against the test CA) gets a
    GET and a POST of 100,000 bytes answered over HTTP/2."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    version = subprocess.run([curl, "--version"], capture_output=True, text=True).stdout
    if "HTTP2" not in version:
        pytest.skip("this curl has no HTTP/2")
    proxy = start_h2(start_proxy, ka, cert=cert)
    ca_file = ca.write_pem(tmp_path / "ca.pem")
    body = tmp_path / "body.bin"
    body.write_bytes(pattern(100_000))
    base = [curl, "--http2", "-sS", "--cacert", ca_file, "--resolve", f"{WWW}:{proxy.tls_port}:{LOOPBACK}",
            "-w", "\n%{http_version} %{http_code}"]
    url = f"https://{WWW}:{proxy.tls_port}"
    got = subprocess.run(base + [f"{url}/cl?size=20"], capture_output=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout == pattern(20) + b"\n2 200", got.stdout[-100:]
    got = subprocess.run(base + ["--data-binary", f"@{body}", f"{url}/echo"], capture_output=True, timeout=60)
    assert got.returncode == 0, got.stderr
    answer, _, tail = got.stdout.rpartition(b"\n")
    assert tail == b"2 200", got.stdout[-100:]
    seen = json.loads(answer)
    assert seen["method"] == "POST" and seen["body_sha256"] == hashlib.sha256(pattern(100_000)).hexdigest()


def test_nghttp_concurrent_requests(ka, start_proxy, cert):
    """nghttp fetching three URLs at once on one connection: every answer
    arrives, over h2, with its own body."""
    nghttp = shutil.which("nghttp")
    if nghttp is None:
        pytest.skip("nghttp is not installed (nghttp2-client; ./setup-env.sh installs it)")
    proxy = start_h2(start_proxy, ka, cert=cert)
    url = f"https://{LOOPBACK}:{proxy.tls_port}"
    got = subprocess.run([nghttp, "-n", "-s", "-H", f":authority: {WWW}",
                          f"{url}/cl?size=10", f"{url}/cl?size=20", f"{url}/cl?size=30"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, f"{got.stdout}\n{got.stderr}"
    assert sorted(targets(ka)) == ["/cl?size=10", "/cl?size=20", "/cl?size=30"]
    assert {r.header("host") for r in ka.records} == {WWW}
