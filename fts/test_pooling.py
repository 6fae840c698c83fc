"""Backend connection pooling (stage 09): connections to a backend are
kept and reused across requests and client connections (up to
backend_keepalive idle ones per backend, each closed after
backend_idle_timeout), a backend's close of an idle one is noticed at
once, and the pooling race (the backend closes a pooled connection just
as a request goes out on it) is retried only when that is safe.

The backend is a KeepAliveBackend (backends.py), which counts the TCP
connections it accepted and which connection carried each request (every
answer says so in X-Conn). Up to stage 08 rsp opened a backend connection
per request and said Connection: close: these tests fail there.
"""

import random
import threading
import time

import pytest

from backends import _ConnReader
from checks import wait_idle
from client import Conn
from netutil import wait_for
from pattern import assert_is_pattern, pattern
from proxy import count_fds, pooled_fds, streamed

FIRED_BY = 5.0        # s: a timeout must have fired by then (a bound, not a measurement)
POLL_TIMEOUT = 10.0   # s: a bound on waiting for something that must happen

pytestmark = pytest.mark.stage(9)


def assert_served(r, size):
    assert r.status == 200 and r.complete, f"{r!r} {r.raw[:300]!r}"
    assert_is_pattern(r.body, size)


def run_clients(count, work):
    """Runs work(i) in `count` threads at once; returns the exceptions
    they raised (a list of (i, exception))."""
    errors = []
    lock = threading.Lock()

    def run(i):
        try:
            work(i)
        except Exception as e:  # collected and reported by the test
            with lock:
                errors.append((i, e))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a client thread hung"
    return errors


# -- reuse ---------------------------------------------------------------------------

def test_backend_connection_reused_across_client_connections(make_keepalive_backend, start_proxy):
    """Five clients one after another, each on its own connection, with
    two requests each: all ten requests go over one backend connection."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    for i in range(5):
        with Conn(proxy.port) as c:
            for j in range(2):
                r = c.request("GET", f"/cl?size={100 * i + j + 1}")
                assert_served(r, 100 * i + j + 1)
                assert r.header("X-Conn") == "1", f"request {i}.{j} went over backend connection {r.header('X-Conn')}"
    assert ka.connections == 1 and ka.requests == 10, ka.conns
    assert "close" not in " ".join(r.header("Connection") or "" for r in ka.records).lower()


def test_many_clients_share_few_backend_connections(make_keepalive_backend, start_proxy):
    """200 requests over 10 client connections at once reach the backend
    over at most 20 TCP connections (at most one per request in flight,
    reused after), each answered in full."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)

    def client(i):
        with Conn(proxy.port) as c:
            for j in range(20):
                size = 1000 + 13 * (20 * i + j)
                r = c.request("GET", f"/cl?size={size}")
                assert_served(r, size)

    errors = run_clients(10, client)
    assert not errors, f"{len(errors)} clients failed, e.g. {errors[0]}"
    assert ka.requests == 200
    assert ka.connections <= 20, f"{ka.connections} backend connections for 200 requests from 10 clients"
    assert sum(ka.requests_per_connection().values()) == 200


def test_backend_keepalive_zero_one_connection_per_request(make_keepalive_backend, start_proxy):
    """backend_keepalive = 0: every request gets its own backend connection
    and tells the backend Connection: close; clients still keep theirs."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka, backend_keepalive=0)
    for i in range(10):
        with Conn(proxy.port) as c:
            for j in range(20):
                r = c.request("GET", f"/cl?size={20 * i + j + 1}")
                assert_served(r, 20 * i + j + 1)
                assert "close" not in r.connection_tokens(), r.headers
    assert ka.requests == 200 and ka.connections == 200, f"{ka.connections} connections for {ka.requests} requests"
    without_close = [r for r in ka.records if "close" not in (r.header("Connection") or "").lower()]
    assert not without_close, f"requests without Connection: close: {without_close[:3]} {without_close[0].headers}"


def test_http10_backend_is_not_pooled(make_backend, start_proxy):
    """A backend that answers HTTP/1.0 without keep-alive closes after each
    response: ten requests on one client connection take ten backend
    connections, all served, and the client connection stays."""
    old = make_backend("old")
    proxy = start_proxy(old)
    with Conn(proxy.port) as c:
        for i in range(10):
            r = c.request("GET", f"/bytes?n={1000 + i}")
            assert_served(r, 1000 + i)
            assert "close" not in r.connection_tokens(), r.headers
    assert old.connections == 10


def test_backend_saying_connection_close_is_not_reused(make_keepalive_backend, start_proxy):
    """A backend whose every response says Connection: close is never sent
    another request on that connection: each of five requests gets a new
    one, and all are served."""
    ka = make_keepalive_backend("ka", max_requests_per_conn=1)
    proxy = start_proxy(ka)
    with Conn(proxy.port) as c:
        for i in range(5):
            assert_served(c.request("GET", f"/cl?size={i + 1}"), i + 1)
    assert ka.connections == 5 and all(n == 1 for n in ka.requests_per_connection().values()), ka.conns


@pytest.mark.stage(9, 17)
def test_backend_keepalive_limits_idle_connections(make_keepalive_backend, start_proxy):
    """backend_keepalive = 2: after five requests at once (five backend
    connections), rsp keeps two idle and closes the other three; the next
    requests reuse the two kept. (From stage 18 backend_keepalive is a
    floor: the five are kept, as the load needed them: test_pool_close.py.)"""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka, backend_keepalive=2)

    def client(i):
        with Conn(proxy.port) as c:
            assert_served(c.request("GET", "/delay?seconds=0.3&size=100"), 100)

    errors = run_clients(5, client)
    assert not errors, errors
    assert ka.connections == 5, ka.conns
    wait_for(lambda: len(ka.open_connections()) <= 2, "rsp closing the connections beyond 2", POLL_TIMEOUT)
    time.sleep(0.2)
    kept = ka.open_connections()
    assert len(kept) == 2, f"rsp kept {len(kept)} idle backend connections, backend_keepalive is 2: {ka.conns}"
    closed = [c for c in ka.conns.values() if c.closed is not None]
    assert all(c.closed_by in ("peer", "reset") for c in closed), closed
    with Conn(proxy.port) as c:
        for _ in range(2):
            r = c.request("GET", "/cl?size=10")
            assert_served(r, 10)
            assert int(r.header("X-Conn")) in {k.id for k in kept}, r.headers
    assert ka.connections == 5


@pytest.mark.parametrize("spoiler", ["/close-delimited?size=10", "/bad?kind=two-content-lengths",
                                     "/cl?size=10&close=1"], ids=["close-delimited", "bad-framing", "backend-close"])
def test_pooling_goes_on_after_a_connection_is_not_reused(make_keepalive_backend, start_proxy, spoiler):
    """A backend connection that cannot be used again (its response was
    close-delimited, or badly framed, or said Connection: close) is
    closed, and pooling goes on: the requests after it, one at a time,
    share one new backend connection."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    with Conn(proxy.port) as c:
        assert_served(c.request("GET", "/cl?size=10"), 10)
    with Conn(proxy.port) as c:
        c.request("GET", spoiler)
    conns = set()
    for i in range(4):
        with Conn(proxy.port) as c:
            r = c.request("GET", f"/cl?size={i + 1}")
            assert_served(r, i + 1)
            conns.add(r.header("X-Conn"))
    assert len(conns) == 1, f"four requests one at a time after {spoiler} took backend connections {sorted(conns)}"
    assert ka.connections == 2, ka.conns


def test_idle_pool_keeps_every_connection_it_counts(make_keepalive_backend, start_proxy):
    """Two requests at once leave two idle connections; after a request
    whose connection is not reused (close-delimited) took one of them,
    the other one is still in the pool: the next request uses it rather
    than a new connection."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)

    def client(i):
        with Conn(proxy.port) as c:
            assert_served(c.request("GET", "/delay?seconds=0.3&size=100"), 100)

    errors = run_clients(2, client)
    assert not errors, errors
    assert ka.connections == 2
    with Conn(proxy.port) as c:
        r = c.request("GET", "/close-delimited?size=10")
        assert r.status == 200, r
    used = int(ka.requests_for("/close-delimited")[0].conn)
    (other,) = {1, 2} - {used}
    with Conn(proxy.port) as c:
        r = c.request("GET", "/cl?size=10")
        assert_served(r, 10)
    assert r.header("X-Conn") == str(other), \
        f"backend connection {other} was idle and open, but the request went over {r.header('X-Conn')}: {ka.conns}"


def test_client_gone_mid_response(make_keepalive_backend, start_proxy):
    """A client that goes away in the middle of a 4 MiB response leaves a
    backend connection with a response still coming: it is not handed to
    the next request as if it were idle. The requests after are answered
    exactly, and rsp's fds settle."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    with Conn(proxy.port) as c:
        c.send(c.request_bytes("GET", "/cl?size=4194304"))
        c.reader.exactly(100000, "the start of a large response")
    for i in range(5):
        with Conn(proxy.port) as c:
            r = c.request("GET", f"/cl?size={1000 + i}")
            assert_served(r, 1000 + i)


# -- closes of idle pooled connections ------------------------------------------------------

def test_backend_close_of_idle_connection_noticed(make_keepalive_backend, start_proxy):
    """A backend that closes its idle connections (after 0.2 s): rsp drops
    them at once (its fds are back to startup), and the next request goes
    over a new connection, served, without being sent on the dead one."""
    ka = make_keepalive_backend("ka", idle_close=0.2)
    proxy = start_proxy(ka)
    with Conn(proxy.port) as c:
        assert_served(c.request("GET", "/cl?size=10"), 10)
        wait_for(lambda: ka.conns[1].closed is not None, "the backend closing its idle connection", POLL_TIMEOUT)
        assert ka.conns[1].closed_by == "idle", ka.conns
        # The client connection stays: one more fd than at startup.
        wait_for(lambda: count_fds(proxy.pid) <= proxy.baseline_fds + 1,
                 "rsp closing the backend connection the backend closed", FIRED_BY)
        r = c.request("GET", "/cl?size=20")
        assert_served(r, 20)
        assert r.header("X-Conn") == "2", r.headers
    assert ka.requests == 2, f"a request was sent on the closed connection: {ka.records}"


def test_backend_idle_timeout_closes_pooled_connection(make_keepalive_backend, start_proxy):
    """backend_idle_timeout = 0.5: an idle pooled connection is closed by
    rsp then (the backend sees the close), not before 0.4 s."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka, backend_idle_timeout=0.5)
    with Conn(proxy.port) as c:
        assert_served(c.request("GET", "/cl?size=10"), 10)
    wait_for(lambda: ka.conns[1].last_response is not None, "the backend noting its answer", POLL_TIMEOUT)
    answered = ka.conns[1].last_response
    wait_for(lambda: ka.conns[1].closed is not None, "rsp closing its idle backend connection", FIRED_BY)
    info = ka.conns[1]
    assert info.closed_by in ("peer", "reset"), info
    idle = info.closed - answered
    assert idle >= 0.4, f"rsp closed its idle backend connection after {idle:.2f} s, backend_idle_timeout 0.5"
    wait_idle(proxy, FIRED_BY)


def test_pooled_connections_without_idle_timeout_stay(make_keepalive_backend, start_proxy):
    """With the default backend_idle_timeout (30 s), an idle pooled
    connection is still open a second later, and used for the next
    request."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    with Conn(proxy.port) as c:
        assert_served(c.request("GET", "/cl?size=10"), 10)
    time.sleep(1)
    assert ka.conns[1].closed is None, ka.conns
    assert len(pooled_fds(proxy.pid, proxy.port)) == 1
    with Conn(proxy.port) as c:
        r = c.request("GET", "/cl?size=10")
        assert_served(r, 10)
        assert r.header("X-Conn") == "1"


def test_backend_closing_idle_connections_under_random_traffic(make_keepalive_backend, start_proxy):
    """A backend that closes connections idle for 0.2 s while five clients
    send 20 requests each at random gaps of 0.1 to 0.5 s (seeded): every
    request is answered in full (a request that meets a connection just
    closed is sent again on another), and the backend did close idle
    connections meanwhile."""
    ka = make_keepalive_backend("ka", idle_close=0.2)
    proxy = start_proxy(ka)
    failures = []

    def client(i):
        rng = random.Random(9000 + i)
        with Conn(proxy.port) as c:
            for j in range(20):
                time.sleep(rng.uniform(0.1, 0.5))
                size = rng.randrange(1, 20000)
                method = rng.choice(["GET", "GET", "HEAD", "POST"])
                if method == "POST":
                    body = pattern(size)
                    r = c.request("POST", "/echo", body=body)
                    ok = r.status == 200 and r.json()["body_length"] == size
                else:
                    r = c.request(method, f"/cl?size={size}")
                    ok = r.status == 200 and (method == "HEAD" or r.body == pattern(size))
                if not ok:
                    failures.append((i, j, method, r, r.raw[:200]))
                    return

    errors = run_clients(5, client)
    assert not errors and not failures, f"client errors: {errors[:3]}, bad answers: {failures[:3]}"
    idle_closes = sum(1 for c in ka.conns.values() if c.closed_by == "idle")
    assert idle_closes > 0, f"the backend never closed an idle connection: {ka.conns}"


# -- the pooling race: a request on a connection the backend closes ------------------------

def warm_up(proxy, ka):
    """One request, so that rsp keeps an idle connection to ka."""
    with Conn(proxy.port) as c:
        assert_served(c.request("GET", "/cl?size=10"), 10)
    assert ka.connections == 1


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "DELETE", "PUT"])
def test_idempotent_request_retried_on_fresh_connection(make_keepalive_backend, start_proxy, method, reset):
    """An idempotent request sent on a pooled connection that the backend
    closes (or resets) on seeing it (no byte of response) is sent again
    on a new connection, and the client gets the answer; nothing shows."""
    ka = make_keepalive_backend("ka", drop_reused=(method,), drop_with_reset=reset)
    proxy = start_proxy(ka)
    warm_up(proxy, ka)
    body = b"put body" if method == "PUT" else b""
    with Conn(proxy.port) as c:
        r = c.request(method, "/echo", body=body)
        assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
        if method != "HEAD":
            assert r.json()["method"] == method and r.json()["body"] == body.decode(), r.body
        assert_served(c.request("GET", "/cl?size=5"), 5)
    tries = ka.requests_for("/echo")
    assert [t.dropped for t in tries] == [True, False], tries
    assert tries[1].index == 1, "the retry went over a reused connection, not a fresh one"


def test_post_with_buffered_body_retried(make_keepalive_backend, start_proxy):
    """A POST whose whole body came with its head (rsp sent it from its
    buffer) is sent again on a new connection when the pooled one is
    closed on it, and the backend gets the whole body."""
    ka = make_keepalive_backend("ka", drop_reused=("POST",))
    proxy = start_proxy(ka)
    warm_up(proxy, ka)
    body = b"a small body, all in one segment with the head"
    with Conn(proxy.port) as c:
        r = c.request("POST", "/echo", body=body)
        assert r.status == 200 and r.json()["body"] == body.decode(), f"{r!r} {r.raw[:300]!r}"
    tries = ka.requests_for("/echo")
    assert [t.dropped for t in tries] == [True, False], tries


def test_post_with_streamed_body_not_retried(make_keepalive_backend, start_proxy, stage):
    """A POST whose body is still arriving (rsp forwarded its first part
    on a pooled connection, which the backend then closes) is never sent
    again: the client gets a 502, and the backend saw the POST once. (From
    stage 17 with request_buffering = false: a buffered body is retried,
    test_buffering.py.)"""
    ka = make_keepalive_backend("ka", drop_reused=("POST",))
    proxy = start_proxy(ka, **streamed(stage))
    warm_up(proxy, ka)
    first, second = pattern(1000), pattern(1000, offset=1000)
    with Conn(proxy.port) as c:
        c.send(c.request_bytes("POST", "/echo", headers=[("Content-Length", "2000")]) + first)
        assert ka.dropped.wait(FIRED_BY), \
            "the POST never reached the backend on the pooled connection (rsp must reuse it)"
        try:
            c.send(second)
        except OSError:
            pass  # rsp may have answered and closed already
        r = c.read_response()
        assert r.status == 502, f"{r!r} {r.raw[:300]!r}"
    time.sleep(0.3)  # a retry would have come by now
    tries = ka.requests_for("/echo")
    assert len(tries) == 1 and tries[0].dropped, f"the streamed POST was sent again: {tries}"


def test_retried_once_only(make_raw_backend, start_proxy):
    """The pooling race is retried once: when the new connection fails the
    same way (the backend closes on reading the head), the client gets a
    502, and the request reached the backend exactly twice."""
    lock = threading.Lock()
    seen = []

    def handle(conn, raw):
        with lock:
            first = not seen
            seen.append(None)
        reader = _ConnReader(conn)
        if first:  # the warm-up: answered, and the connection kept
            reader.until(b"\r\n\r\n")
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        head = reader.until(b"\r\n\r\n")
        raw.record(head)  # then close without a word

    raw_backend = make_raw_backend(handle)
    proxy = start_proxy(raw_backend)
    with Conn(proxy.port) as c:
        r = c.request("GET", "/warm")
        assert r.status == 200 and r.body == b"ok", r
    with Conn(proxy.port) as c:
        r = c.request("GET", "/doomed")
        assert r.status == 502, f"{r!r} {r.raw[:300]!r}"
    time.sleep(0.3)  # a third try would have come by now
    doomed = [h for h in raw_backend.received if h.startswith(b"GET /doomed ")]
    assert len(doomed) == 2, f"the request reached the backend {len(doomed)} times: {raw_backend.received}"
    assert raw_backend.connections == 2, raw_backend.connections
