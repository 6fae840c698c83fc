"""Client keep-alive (stage 09): many requests on one client connection,
HTTP/1.0 and HTTP/1.1 rules, pipelining, keepalive_timeout and
keepalive_requests, every way a response is framed (each followed by
another request on the same connection), a backend's broken framing,
hop-by-hop headers, and the four new settings' limits.

The backend is a KeepAliveBackend (backends.py): an HTTP/1.1 server that
keeps its connections open and records every request; the client is
client.Conn, which reads exactly one response at a time by its framing.
Up to stage 08 every answer said Connection: close and the connection
ended after it: these tests fail there.
"""

import time

import pytest

from backends import BAD_RESPONSES, HOP_RESPONSE_HEADERS, chunked_body
from checks import assert_config_error
from client import Conn
from netutil import LOOPBACK, free_port, wait_for
from pattern import assert_is_pattern, assert_same_bytes, pattern
from proxy import proxy_arguments, run_rsp

TIMEOUT = 0.5               # s: the timeout under test
FIRED_BY = 5.0              # s: it must have fired by then (a bound, not a measurement)
NOT_BEFORE = 0.8 * TIMEOUT  # s: and not before this
POLL_TIMEOUT = 10.0         # s: a bound on waiting for something that must happen

# The hop-by-hop request headers a client may send, and one end-to-end
# header that must pass. Connection names X-Foo, so X-Foo is hop-by-hop.
HOP_REQUEST_HEADERS = [
    ("Connection", "X-Foo"),
    ("X-Foo", "1"),
    ("Keep-Alive", "timeout=300"),
    ("TE", "trailers"),
    ("Proxy-Connection", "keep-alive"),
    ("Trailer", "X-Checksum"),
    ("Upgrade", "h2c"),
]
HOP_NAMES = {"connection", "x-foo", "x-hop", "keep-alive", "te", "proxy-connection", "trailer", "upgrade"}

pytestmark = pytest.mark.stage(9)


@pytest.fixture
def ka(make_keepalive_backend):
    return make_keepalive_backend("ka")


@pytest.fixture
def proxy(ka, start_proxy):
    return start_proxy(ka)


def assert_kept(r):
    """r says nothing about closing: an HTTP/1.1 connection stays open."""
    assert "close" not in r.connection_tokens(), f"{r!r}: {r.headers}"


def assert_served(r, size):
    """r is the KeepAliveBackend's complete answer to /cl?size=N."""
    assert r.status == 200 and r.complete, f"{r!r} {r.raw[:300]!r}"
    assert r.header("X-Backend") == "ka", r.headers
    assert_is_pattern(r.body, size)


def assert_still_serves(c, size=321):
    """Another request on connection c is answered in full."""
    r = c.request("GET", f"/cl?size={size}")
    assert_served(r, size)
    return r


def assert_closed_after(c, r):
    """r said Connection: close, and then the connection ended with a FIN
    (not a reset), without another byte."""
    assert "close" in r.connection_tokens(), f"{r!r}: expected Connection: close, got {r.headers}"
    state = c.state(FIRED_BY)
    assert state == "eof", f"after Connection: close the connection is {state!r}: {bytes(c.reader.buf[:300])!r}"


# -- many requests on one connection -------------------------------------------------

def test_hundred_requests_on_one_connection(ka, proxy):
    """100 requests one after another on one client connection are all
    answered in full, none with Connection: close, and all reach the
    backend; the connection is still open after them."""
    with Conn(proxy.port) as c:
        for i in range(100):
            size = 37 * i + 1
            r = c.request("GET", f"/cl?size={size}&i={i}")
            assert_served(r, size)
            assert_kept(r)
        assert c.is_open(0.2), "the connection ended after 100 requests"
    assert ka.requests == 100
    assert [r.target for r in ka.records] == [f"/cl?size={37 * i + 1}&i={i}" for i in range(100)]


def test_http11_connection_close_is_honoured(ka, proxy):
    """An HTTP/1.1 request with Connection: close gets a response saying
    Connection: close, and the connection ends after it."""
    with Conn(proxy.port) as c:
        assert_kept(assert_still_serves(c))
        r = c.request("GET", "/cl?size=100", headers=[("Connection", "close")])
        assert_served(r, 100)
        assert_closed_after(c, r)


def test_http10_closes_by_default(ka, proxy):
    """An HTTP/1.0 request without Connection: keep-alive is answered with
    Connection: close, and the connection ends after it."""
    with Conn(proxy.port) as c:
        r = c.request("GET", "/cl?size=100", version="1.0")
        assert_served(r, 100)
        assert_closed_after(c, r)


def test_http10_keep_alive(ka, proxy):
    """HTTP/1.0 requests with Connection: keep-alive get responses saying
    Connection: keep-alive and the connection stays; the first one
    without it is the last."""
    with Conn(proxy.port) as c:
        for size in (10, 20, 30):
            r = c.request("GET", f"/cl?size={size}", headers=[("Connection", "keep-alive")], version="1.0")
            assert_served(r, size)
            assert r.connection_tokens() == ["keep-alive"], r.headers
        r = c.request("GET", "/cl?size=40", version="1.0")
        assert_served(r, 40)
        assert_closed_after(c, r)
    assert ka.requests == 4


# -- pipelining ------------------------------------------------------------------------

def test_pipelined_requests_answered_in_order(ka, proxy):
    """Ten requests sent in one write are answered in order, each with its
    own answer, and the connection stays open."""
    with Conn(proxy.port) as c:
        c.send(b"".join(c.request_bytes("GET", f"/p/{i}?n={i}") for i in range(10)))
        for i in range(10):
            r = c.read_response()
            assert r.status == 200, f"response {i}: {r!r} {r.raw[:300]!r}"
            assert r.body == f"path=/p/{i}?n={i}\n".encode(), f"response {i} is {r.body!r}"
        assert_still_serves(c)
    assert [r.target for r in ka.records[:10]] == [f"/p/{i}?n={i}" for i in range(10)]


def test_pipelined_behind_large_responses(ka, proxy):
    """Requests pipelined behind large responses (3 MiB with a length,
    1 MiB chunked) wait their turn: each response arrives whole and in
    order, nothing of the next mixed into the one before."""
    raw, decoded = chunked_body(1024 * 1024, 16)
    with Conn(proxy.port) as c:
        c.send(c.request_bytes("GET", "/cl?size=3145728")
               + c.request_bytes("GET", "/chunked?size=1048576&chunks=16")
               + c.request_bytes("GET", "/p/last"))
        assert_served(c.read_response(), 3145728)
        r = c.read_response()
        assert r.framing == "chunked", r.headers
        assert_same_bytes(r.body, raw, "the chunked body")
        r = c.read_response()
        assert r.body == b"path=/p/last\n", r
        assert c.is_open(0.1)


def test_pipelined_requests_of_every_framing(ka, proxy):
    """Pipelined requests whose responses are framed differently (a HEAD
    with a Content-Length, chunked, 204, 304, 103 then 200, a POST with a
    body) are each read by their framing, in order."""
    raw, decoded = chunked_body(3000, 4)
    with Conn(proxy.port) as c:
        c.send(c.request_bytes("HEAD", "/cl?size=5000")
               + c.request_bytes("GET", "/chunked?size=3000&chunks=4")
               + c.request_bytes("GET", "/status?code=204")
               + c.request_bytes("POST", "/echo", body=b"pipelined body")
               + c.request_bytes("GET", "/status?code=304")
               + c.request_bytes("GET", "/interim")
               + c.request_bytes("GET", "/cl?size=777"))
        r = c.read_response(head=True)
        assert r.status == 200 and r.header("Content-Length") == "5000" and r.body == b"", r
        r = c.read_response()
        assert r.framing == "chunked", r.headers
        assert_same_bytes(r.body, raw, "the chunked body")
        r = c.read_response()
        assert r.status == 204, r
        r = c.read_response()
        assert r.status == 200 and r.json()["body"] == "pipelined body", r.raw[:300]
        r = c.read_response()
        assert r.status == 304, r
        r = c.read_response()
        assert [i.status for i in r.interim] == [103] and r.body == b"after the hints\n", r
        assert_served(c.read_response(), 777)
        assert c.is_open(0.1)


# -- keepalive_timeout and keepalive_requests ---------------------------------------------

def test_keepalive_timeout_closes_idle_connection_silently(ka, start_proxy):
    """With keepalive_timeout = 0.5 a connection idle after a response is
    closed then, not before, without a byte (no 408) and with a FIN."""
    proxy = start_proxy(ka, keepalive_timeout=TIMEOUT)
    with Conn(proxy.port) as c:
        assert_kept(assert_still_serves(c))
        assert_kept(assert_still_serves(c))
        idle_from = time.monotonic()
        state = c.state(FIRED_BY)
        elapsed = time.monotonic() - idle_from
    assert state == "eof", f"an idle connection ended as {state!r} (data: {bytes(c.reader.buf[:300])!r})"
    assert elapsed >= NOT_BEFORE, f"closed after {elapsed:.2f} s, with keepalive_timeout {TIMEOUT}"
    assert ka.requests == 2


def test_keepalive_timeout_restarts_after_each_response(ka, start_proxy):
    """Requests 0.3 s apart on a connection with keepalive_timeout = 0.5
    are all served: the idle time counts from the last response."""
    proxy = start_proxy(ka, keepalive_timeout=TIMEOUT)
    with Conn(proxy.port) as c:
        for _ in range(5):
            assert_kept(assert_still_serves(c))
            time.sleep(0.6 * TIMEOUT)
        assert_still_serves(c)


def test_header_timeout_applies_once_next_request_began(ka, start_proxy):
    """keepalive_timeout (0.5 s) bounds the wait for the next request's
    first byte only: a next request begun in time but left unfinished is
    not closed at 0.5 s but gets header_timeout's 408 (1.5 s)."""
    proxy = start_proxy(ka, keepalive_timeout=TIMEOUT, header_timeout=3 * TIMEOUT)
    with Conn(proxy.port) as c:
        assert_still_serves(c)
        c.send(b"GET /cl?size=5 HTTP/1.1\r\nHost: a\r\n")
        begun = time.monotonic()
        assert c.is_open(2 * TIMEOUT), "the connection ended while its next request was arriving"
        r = c.read_response()
        elapsed = time.monotonic() - begun
    assert r.status == 408, f"{r!r} {r.raw[:300]!r}"
    assert elapsed >= 0.8 * 3 * TIMEOUT, f"a 408 after {elapsed:.2f} s, with header_timeout {3 * TIMEOUT}"


def test_keepalive_timeout_zero_closes_after_each_response(ka, start_proxy):
    """keepalive_timeout = 0: each response says Connection: close, and
    the connection ends after it; the backend connection is still reused."""
    proxy = start_proxy(ka, keepalive_timeout=0)
    for size in (10, 20, 30):
        with Conn(proxy.port) as c:
            r = c.request("GET", f"/cl?size={size}")
            assert_served(r, size)
            assert_closed_after(c, r)
    assert ka.connections == 1, "the client side's setting changed the backend side"


@pytest.mark.parametrize("limit", [1, 3])
def test_keepalive_requests_limit(ka, start_proxy, limit):
    """keepalive_requests = N: the Nth response on a connection says
    Connection: close and the connection ends after it; the ones before
    do not."""
    proxy = start_proxy(ka, keepalive_requests=limit)
    with Conn(proxy.port) as c:
        for i in range(1, limit + 1):
            r = c.request("GET", f"/cl?size={i}")
            assert_served(r, i)
            if i < limit:
                assert_kept(r)
        assert_closed_after(c, r)


def test_keepalive_requests_limit_with_pipelining(ka, start_proxy):
    """keepalive_requests = 3 with five requests pipelined: three answers,
    the third saying Connection: close, then the end; the other two never
    reach the backend."""
    proxy = start_proxy(ka, keepalive_requests=3)
    with Conn(proxy.port) as c:
        c.send(b"".join(c.request_bytes("GET", f"/p/{i}") for i in range(5)))
        for i in range(3):
            r = c.read_response()
            assert r.body == f"path=/p/{i}\n".encode(), r
        assert_closed_after(c, r)
    assert [r.target for r in ka.records] == ["/p/0", "/p/1", "/p/2"]


# -- framing: each response then another request on the same connection -----------

def check_length(c, ka):
    r = c.request("GET", "/cl?size=100000")
    assert r.framing == "length", r.headers
    assert_served(r, 100000)


def check_chunked(c, ka):
    raw, decoded = chunked_body(70000, 5, trailer=True)
    r = c.request("GET", "/chunked?size=70000&chunks=5&trailer=1")
    assert r.status == 200 and r.framing == "chunked", f"{r!r} {r.headers}"
    assert r.header("Content-Length") is None, r.headers
    assert_same_bytes(r.body, raw, "the chunked body (chunks and trailer as the backend sent them)")
    assert_same_bytes(r.decoded, decoded)


def check_head(c, ka):
    r = c.request("HEAD", "/cl?size=5000")
    assert r.status == 200 and r.header("Content-Length") == "5000", f"{r!r} {r.headers}"
    assert r.body == b""


def check_head_chunked(c, ka):
    r = c.request("HEAD", "/chunked?size=5000")
    assert r.status == 200 and r.header("Transfer-Encoding") == "chunked", f"{r!r} {r.headers}"


def check_204(c, ka):
    r = c.request("GET", "/status?code=204")
    assert r.status == 204, r


def check_304(c, ka):
    r = c.request("GET", "/status?code=304", headers=[("If-None-Match", '"v1"')])
    assert r.status == 304 and r.header("ETag") == '"v1"', f"{r!r} {r.headers}"


def check_205(c, ka):
    r = c.request("GET", "/status?code=205")
    assert r.status == 205 and r.body == b"", r


def check_interim(c, ka):
    r = c.request("GET", "/interim")
    assert [i.status for i in r.interim] == [103], f"{r!r}: the 103 was not forwarded"
    assert r.interim[0].header("Link") == "</style.css>; rel=preload; as=style", r.interim[0].headers
    assert r.status == 200 and r.body == b"after the hints\n", r


def check_post(c, ka):
    body = pattern(50000)
    r = c.request("POST", "/echo", body=body)
    assert r.status == 200 and r.json()["body_length"] == 50000, r.raw[:300]


def check_chunked_request(c, ka):
    from client import chunked
    body = pattern(20000)
    r = c.request("POST", "/echo", headers=[("Transfer-Encoding", "chunked")], body=chunked(body, [7000]))
    assert r.status == 200 and r.json()["body_length"] == 20000, r.raw[:300]


FRAMINGS = [check_length, check_chunked, check_head, check_head_chunked, check_204, check_304, check_205,
            check_interim, check_post, check_chunked_request]


@pytest.mark.parametrize("check", FRAMINGS, ids=[f.__name__[len("check_"):] for f in FRAMINGS])
def test_framing_then_another_request(ka, proxy, check):
    """Each kind of response (or request body) is passed on with its
    framing, and the connection then carries another request: its end
    was found from the framing, not from a close."""
    with Conn(proxy.port) as c:
        check(c, ka)
        assert_kept(assert_still_serves(c))
        check(c, ka)
        assert_kept(assert_still_serves(c))
    assert ka.connections == 1, f"the backend connection was not reused: {ka.conns}"


def test_close_delimited_response(ka, proxy):
    """A response with neither Content-Length nor chunked ends when the
    backend closes: the client gets it whole with Connection: close,
    then the end of the connection."""
    with Conn(proxy.port) as c:
        assert_still_serves(c)
        r = c.request("GET", "/close-delimited?size=300000")
        assert r.status == 200, r
        assert_is_pattern(r.decoded, 300000)
        assert "close" in r.connection_tokens(), r.headers
        assert r.eof and not r.reset, "the connection did not end cleanly after a close-delimited body"


def test_chunked_response_to_http10_client_is_dechunked(ka, proxy):
    """An HTTP/1.0 client cannot read chunked: it gets the body without
    the coding (no Transfer-Encoding), and the connection ends after it."""
    raw, decoded = chunked_body(70000, 5, trailer=True)
    with Conn(proxy.port) as c:
        r = c.request("GET", "/chunked?size=70000&chunks=5&trailer=1", version="1.0")
        assert r.status == 200 and r.header("Transfer-Encoding") is None, r.headers
        assert_same_bytes(r.decoded, decoded)
        assert_closed_after(c, r)


def test_chunked_response_to_http10_keep_alive_client(ka, proxy):
    """The same for an HTTP/1.0 client asking for keep-alive: the
    de-chunked body has no length, so only the close can end it."""
    raw, decoded = chunked_body(5000, 3)
    with Conn(proxy.port) as c:
        r = c.request("GET", "/chunked?size=5000&chunks=3", headers=[("Connection", "keep-alive")], version="1.0")
        assert r.status == 200 and r.header("Transfer-Encoding") is None, r.headers
        assert_same_bytes(r.decoded, decoded)
        if r.header("Content-Length") is None:
            assert_closed_after(c, r)


def test_no_interim_response_to_http10_client(ka, proxy):
    """An HTTP/1.0 client does not know 1xx responses: it gets the final
    response alone, not the backend's 103."""
    with Conn(proxy.port) as c:
        r = c.request("GET", "/interim", headers=[("Connection", "keep-alive")], version="1.0")
        assert r.interim == [] and r.status == 200, f"{r!r}: {[i.raw for i in r.interim]}"
        assert r.body == b"after the hints\n", r


def test_expect_100_continue(ka, proxy):
    """A client sending Expect: 100-continue gets the 100 Continue before
    it sends its body, then the final answer; the connection stays."""
    body = pattern(30000)
    with Conn(proxy.port) as c:
        c.send(c.request_bytes("POST", "/echo", headers=[("Expect", "100-continue"),
                                                          ("Content-Length", str(len(body)))]))
        head = c.reader.until(b"\r\n\r\n", "the 100 Continue")
        assert head.startswith(b"HTTP/1.1 100 "), f"expected a 100 Continue first, got {head[:300]!r}"
        c.send(body)
        r = c.read_response()
        assert r.status == 200 and r.json()["body_length"] == len(body), r.raw[:300]
        assert_kept(r)
        assert_still_serves(c)


# -- a backend's broken framing ----------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(BAD_RESPONSES))
def test_bad_backend_framing_gives_502(ka, proxy, kind):
    """A response whose framing cannot be trusted (two Content-Lengths, a
    negative or garbled one, chunked before another coding, a head that is
    not HTTP, a 101 to a request that asked for no upgrade) becomes rsp's
    502.
    A malformed chunk size or trailer line comes after a good head, which
    rsp may have passed on already: then the client's connection is cut
    instead (the response visibly incomplete). Either way that backend connection is
    closed, not reused, and the next request is served on another one."""
    c = Conn(proxy.port)
    try:
        assert_still_serves(c)
        r = c.request("GET", f"/bad?kind={kind}")
        (bad,) = ka.requests_for("/bad")
        if kind in ("malformed-chunked", "malformed-trailer") and r.status == 200:
            assert not r.complete and r.eof, f"a broken chunked body was not cut off: {r!r} {r.raw[:300]!r}"
            c.close()
            c = Conn(proxy.port)
        else:
            assert r.status == 502, f"{r!r} {r.raw[:300]!r}"
            assert r.header("X-Backend") is None, "the backend's bad head was passed on"
        if "close" in r.connection_tokens():
            assert c.closed(FIRED_BY), "the 502 said Connection: close, but the connection stayed"
            c.close()
            c = Conn(proxy.port)
        nxt = assert_still_serves(c)
        assert nxt.header("X-Conn") != str(bad.conn), "the connection with the bad response was used again"
    finally:
        c.close()
    wait_for(lambda: ka.conns[bad.conn].closed is not None, "the bad backend connection closed by rsp", POLL_TIMEOUT)
    assert ka.conns[bad.conn].closed_by in ("peer", "reset"), ka.conns[bad.conn]


# -- hop-by-hop headers --------------------------------------------------------------------

def test_hop_by_hop_request_headers_not_forwarded(ka, proxy):
    """Connection and the names it lists, Keep-Alive, TE, Proxy-Connection,
    Trailer and Upgrade (without Connection: upgrade) from a client do not
    reach the backend; an end-to-end header does."""
    with Conn(proxy.port) as c:
        r = c.request("GET", "/echo", headers=HOP_REQUEST_HEADERS + [("X-Kept", "yes")])
        assert r.status == 200, r
        assert_kept(r)
    (record,) = ka.records
    names = set(record.header_names())
    assert not names & (HOP_NAMES - {"connection"}), f"hop-by-hop headers forwarded: {record.headers}"
    assert record.header("X-Kept") == "yes", record.headers
    tokens = [t.strip().lower() for t in (record.header("Connection") or "").split(",") if t.strip()]
    assert set(tokens) <= {"keep-alive"}, f"the client's Connection header was forwarded: {record.headers}"


def test_hop_by_hop_response_headers_not_forwarded(ka, proxy):
    """The same hop-by-hop headers from a backend do not reach the
    client; an end-to-end header does, and the connection stays."""
    with Conn(proxy.port) as c:
        r = c.request("GET", "/hop")
        assert r.status == 200 and r.body == b"hop\n", r
        names = {n.lower() for n, _ in r.headers}
        leaked = names & (HOP_NAMES - {"connection"})
        assert not leaked, f"hop-by-hop headers reached the client: {r.headers}"
        assert r.header("X-End-To-End") == "kept", r.headers
        assert "x-hop" not in r.connection_tokens(), r.headers
        assert_still_serves(c)
    assert {n.lower() for n, _ in HOP_RESPONSE_HEADERS} <= HOP_NAMES


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_backend_gets_http11(ka, proxy, version):
    """rsp speaks HTTP/1.1 to backends, for an HTTP/1.0 client too, and
    asks for no close: the backend connection can be used again."""
    with Conn(proxy.port) as c:
        r = c.request("GET", "/echo", headers=[("Connection", "keep-alive")], version=version)
        assert r.status == 200, r
    (record,) = ka.records
    assert record.version == "HTTP/1.1", record
    assert "close" not in (record.header("Connection") or "").lower(), record.headers


# -- rsp's own answers to malformed requests close ---------------------------------------

LONG_TARGET = "/" + "a" * 2000
REFUSED = [
    ("bad-header-line", b"GET / HTTP/1.1\r\nHost: a\r\nNo colon here\r\n\r\n", 400),
    ("http-2.0", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    ("line-too-long", f"GET {LONG_TARGET} HTTP/1.1\r\nHost: a\r\n\r\n".encode(), 414),
    ("head-too-large", b"GET / HTTP/1.1\r\nHost: a\r\n" + b"X-Fill: " + b"b" * 900 + b"\r\n" * 1
     + b"".join(b"X-Fill-%d: %s\r\n" % (i, b"c" * 900) for i in range(4)) + b"\r\n", 431),
]


@pytest.mark.parametrize("data, status", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_request_on_kept_connection_closes_it(ka, start_proxy, data, status):
    """On a connection that already carried a request, a malformed one gets
    rsp's own error page with Connection: close, then the end; the
    backend never sees it."""
    proxy = start_proxy(ka, max_request_line=1000, max_request_head=2048)
    with Conn(proxy.port) as c:
        assert_still_serves(c)
        c.send(c.request_bytes("GET", "/p/before") + data)
        r = c.read_response()
        assert r.body == b"path=/p/before\n", r
        r = c.read_response()
        assert r.status == status, f"{r!r} {r.raw[:300]!r}"
        assert_closed_after(c, r)
    assert [r.target for r in ka.records] == ["/cl?size=321", "/p/before"]


# -- the settings -----------------------------------------------------------------------

B = (LOOPBACK, 1)  # a backend address nothing has to answer at: these configs never serve

BAD_SETTINGS = [
    ("keepalive_timeout", -1), ("keepalive_timeout", -0.5), ("keepalive_timeout", "75"),
    ("keepalive_timeout", True),
    ("keepalive_requests", 0), ("keepalive_requests", -1), ("keepalive_requests", 1.5),
    ("keepalive_requests", "1000"),
    ("backend_keepalive", -1), ("backend_keepalive", 1.5), ("backend_keepalive", "32"),
    ("backend_keepalive", False),
    ("backend_idle_timeout", 0), ("backend_idle_timeout", -1), ("backend_idle_timeout", "30"),
]


@pytest.mark.parametrize("setting, value", BAD_SETTINGS, ids=[f"{s}={v!r}" for s, v in BAD_SETTINGS])
def test_bad_keepalive_setting(rsp, tmp_path, setting, value):
    """A keep-alive setting of the wrong type or out of its range is a
    config error: a non-zero exit status and one line on stderr naming the
    file and the setting; nothing on stdout."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), {setting: value})
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, setting, quoted=False, status=None)


def test_keepalive_settings_accepted(ka, start_proxy):
    """Fractions of a second, and the smallest counts, are accepted, and
    requests are served with them."""
    proxy = start_proxy(ka, keepalive_timeout=2.5, keepalive_requests=1, backend_keepalive=0,
                        backend_idle_timeout=0.25)
    with Conn(proxy.port) as c:
        r = c.request("GET", "/cl?size=10")
        assert_served(r, 10)
        assert_closed_after(c, r)
