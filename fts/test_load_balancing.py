"""Several backends (stage 05 on): balancing, failover to the next backend
when a connect fails, passive health (a backend whose connect failed is
skipped for down_time seconds), 502 when nothing can be reached, and the
forms of the `listen` setting.

Outcomes are read from the backends' hit counters, the X-Backend header
each test backend puts in its answers, and the proxy's log lines; never
from timing. Pauses only set situations up, and waiting is a bounded poll."""

import base64
import functools
import random
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends import RawBackend, read_head, read_head_then_close
from checks import assert_logged_once, assert_logged_times, assert_rsp_page, backend_name, served_by, went_down
from client import READ_TIMEOUT, HeldRequest, get, request
import netutil
from netutil import LOOPBACK, closed_ports, free_port, ipv6_loopback_available, release_port
from pattern import assert_same_bytes
from proxy import count_fds, streamed

MiB = 1024 * 1024
POLL_TIMEOUT = 10.0  # a bound on waiting for something that must happen, not a measurement
NOTHING_REACHABLE = "no backend can be reached"
ANSWERING_AGAIN = "a backend answered again"


# -- helpers ---------------------------------------------------------------------

def came_back(host, port):
    return f"backend {backend_name(host, port)} is up again"


def ask(proxy, count, path="/echo", held=0):
    """Sends `count` sequential GETs; returns who served each, in order.
    `held` relays (client + backend socket each) stay open meanwhile.

    The proxy closes a relay (and its backend stops counting as busy for
    least_conn) a moment after the client has read the response: the client
    sees EOF, closes, and only that close ends the relay. So before each
    request, wait until the proxy holds just its idle fds and the held
    relays'; otherwise a request can race the previous close and find a
    tie."""
    settled = proxy.baseline_fds + 2 * held
    seen = []
    for _ in range(count):
        wait_for(lambda: count_fds(proxy.pid, pipes=False) == settled,
                 f"the proxy to hold {settled} fds (idle, plus {held} held relays)")
        seen.append(served_by(get(proxy.port, path)))
    return seen


def assert_rotation(seen, order):
    """seen is `order` repeated (starting anywhere in it)."""
    assert seen and seen[0] in order, f"{seen[:1]} is not one of {order}"
    start = order.index(seen[0])
    expected = [order[(start + i) % len(order)] for i in range(len(seen))]
    assert seen == expected, f"backends did not take turns in the configured order {order}"


wait_for = functools.partial(netutil.wait_for, timeout=POLL_TIMEOUT, pause=0.05)


needs_ipv6 = pytest.mark.skipif(not ipv6_loopback_available(), reason="no IPv6 loopback (::1) here")


def refuses(address, port):
    """True if nothing accepts connections at address:port."""
    try:
        socket.create_connection((address, port), timeout=READ_TIMEOUT).close()
    except ConnectionRefusedError:
        return True
    return False


# -- balancing ---------------------------------------------------------------------

@pytest.mark.stage(5)
@pytest.mark.parametrize("balance", [None, "round_robin", "least_conn"],
                         ids=["default", "round_robin", "least_conn"])
def test_sequential_requests_take_turns(make_backend, start_proxy, balance):
    """Nine requests one after the other go to three backends in strict
    turns (a b c a b c a b c, from wherever it starts): the default and
    round_robin rotate, and least_conn, where every backend is idle and so
    tied, rotates too."""
    backends = [make_backend(n) for n in "abc"]
    options = {} if balance is None else {"balance": balance}
    proxy = start_proxy(*backends, **options)
    seen = ask(proxy, 9)
    assert_rotation(seen, ["a", "b", "c"])
    assert [b.hits["/echo"] for b in backends] == [3, 3, 3]


@pytest.mark.stage(5)
@pytest.mark.parametrize("held_count", [1, 2])
def test_least_conn_avoids_busy_backends(make_backend, start_proxy, stage, held_count):
    """With least_conn, while one (or two) of three backends hold a request
    that has not finished, new requests go to the idle ones only, taking
    turns between them; the held requests then complete normally. (From
    stage 17 with request_buffering = false: a body still on its way
    holds no backend otherwise.)"""
    backends = [make_backend(n) for n in "abc"]
    proxy = start_proxy(*backends, balance="least_conn", **streamed(stage))
    held = [HeldRequest(proxy.port) for _ in range(held_count)]
    try:
        seen = ask(proxy, 6, held=held_count)
        busy = [served_by(h.finish()) for h in held]
    finally:
        for h in held:
            h.close()
    assert len(set(busy)) == held_count, f"two held requests went to the same backend: {busy}"
    idle = [n for n in "abc" if n not in busy]
    assert set(seen) <= set(idle), f"a busy backend got a new request: busy {busy}, requests went to {seen}"
    assert_rotation(seen, idle)


@pytest.mark.stage(5)
def test_round_robin_ignores_busy_backends(make_backend, start_proxy, stage):
    """With round_robin (unlike least_conn) a backend holding an unfinished
    request still gets its turn: of six new requests over three backends,
    two go to the busy one. (From stage 17 with request_buffering =
    false, as above.)"""
    backends = [make_backend(n) for n in "abc"]
    proxy = start_proxy(*backends, balance="round_robin", **streamed(stage))
    held = HeldRequest(proxy.port)
    try:
        seen = ask(proxy, 6, held=1)
        busy = served_by(held.finish())
    finally:
        held.close()
    assert seen.count(busy) == 2, f"busy backend {busy}; requests went to {seen}"
    assert_rotation(seen, ["a", "b", "c"])


# -- failover and passive health ----------------------------------------------------------

@pytest.mark.stage(5)
@pytest.mark.parametrize("balance", ["round_robin", "least_conn"])
def test_down_backend_is_skipped(make_backend, start_proxy, balance):
    """A backend whose port is closed costs clients nothing: every request
    gets a 200 from the others (the one that tried it first fails over),
    it is logged as down once, and while it is marked down it gets no
    traffic: a server started on its port afterwards (within down_time)
    receives no request while the others, taking turns, serve them all."""
    a, c = make_backend("a"), make_backend("c")
    (down_port,) = closed_ports(1)
    proxy = start_proxy(a, (LOOPBACK, down_port), c, balance=balance, down_time=60)
    first = ask(proxy, 4)
    assert_logged_once(proxy, went_down(LOOPBACK, down_port))
    late = make_backend("late", port=release_port(down_port))
    later = ask(proxy, 10)
    assert late.total_hits == 0, f"a backend marked down got {late.total_hits} request(s)"
    assert_rotation(first + later, ["a", "c"])
    assert_logged_once(proxy, went_down(LOOPBACK, down_port))
    assert_logged_times(proxy, "is up again", 0)
    assert_logged_times(proxy, NOTHING_REACHABLE, 0)


@pytest.mark.stage(5)
@pytest.mark.parametrize("all_down", [False, True], ids=["one-down", "all-down"])
def test_concurrent_clients_while_down(make_backend, start_proxy, all_down):
    """Thirty clients at once while one backend's port is closed (several
    connects to it are under way when the first fails): each gets a 200
    from the other two, and the failure is logged once. With every port
    closed, each gets a 502 and the outage is logged once."""
    if all_down:
        down = [(LOOPBACK, p) for p in closed_ports(3)]
        up = []
        pool = down
    else:
        down = [(LOOPBACK, closed_ports(1)[0])]
        up = [make_backend("a"), make_backend("c")]
        pool = [up[0], down[0], up[1]]
    proxy = start_proxy(*pool, down_time=60)
    with ThreadPoolExecutor(30) as executor:
        responses = list(executor.map(lambda i: get(proxy.port, f"/echo?i={i}"), range(30)))
    for r in responses:
        if all_down:
            assert_bad_gateway(r)
        else:
            assert served_by(r) in ("a", "c")
    assert sum(b.total_hits for b in up) == (0 if all_down else 30)
    for host, port in down:
        assert_logged_once(proxy, went_down(host, port))
    assert_logged_times(proxy, NOTHING_REACHABLE, 1 if all_down else 0)


def assert_bad_gateway(r):
    """r is rsp's own 502: status line, an HTML body of the announced
    length, and the end of the connection."""
    assert_rsp_page(r, 502, "Bad Gateway")


@pytest.mark.stage(5)
def test_all_backends_down_then_one_comes_back(make_backend, start_proxy):
    """With every backend's port closed each client gets a 502 (an HTML
    page, then the connection closes) and the proxy keeps running; the
    outage is logged once, not once per request, and each backend's
    failure once. When one of them listens again on its port, the next
    request is served (when all are down, the down ones are tried anyway),
    and its return and the end of the outage are each logged once."""
    ports = closed_ports(2)
    proxy = start_proxy(*[(LOOPBACK, p) for p in ports], down_time=0.5)
    for _ in range(5):
        assert_bad_gateway(get(proxy.port, "/echo"))
    assert proxy.alive()
    assert_logged_once(proxy, NOTHING_REACHABLE)
    for p in ports:
        assert_logged_once(proxy, went_down(LOOPBACK, p))
    assert_logged_times(proxy, ANSWERING_AGAIN, 0)

    back = make_backend("back", port=release_port(ports[1]))
    assert ask(proxy, 6) == ["back"] * 6
    assert back.hits["/echo"] == 6
    assert_logged_once(proxy, came_back(LOOPBACK, ports[1]))
    assert_logged_once(proxy, ANSWERING_AGAIN)
    assert_logged_once(proxy, NOTHING_REACHABLE)
    assert_logged_times(proxy, came_back(LOOPBACK, ports[0]), 0)


@pytest.mark.stage(5)
def test_backend_dies_and_comes_back(make_backend, start_proxy):
    """A backend that stops mid-test is failed over (no client sees an
    error) and logged as down once; restarted on the same port, it gets
    traffic again once down_time has passed, without restarting the proxy,
    is logged as up again once, and takes its turns as before."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a, b, down_time=0.5)
    assert sorted(ask(proxy, 4)) == ["a", "a", "b", "b"]
    port = b.port
    b.stop()
    assert ask(proxy, 6) == ["a"] * 6
    assert_logged_once(proxy, went_down(LOOPBACK, port))

    b_again = make_backend("b", port=port)
    seen = []

    def restarted_backend_served():
        seen.append(served_by(get(proxy.port, "/echo")))  # every request is served meanwhile
        return b_again.total_hits > 0

    wait_for(restarted_backend_served, "the restarted backend gets a request")
    assert seen[-1] == "b"
    assert_logged_once(proxy, came_back(LOOPBACK, port))
    assert_rotation(ask(proxy, 4), ["a", "b"])
    assert_logged_once(proxy, went_down(LOOPBACK, port))
    assert_logged_times(proxy, NOTHING_REACHABLE, 0)


@pytest.mark.stage(5)
def test_request_sent_is_not_replayed(make_backend, make_raw_backend, start_proxy):
    """A backend that accepts a request and closes without answering: the
    request is not sent again to the other backend (its hit counter does
    not move), the client's connection ends (no answer, or a 502) instead
    of hanging, and the backend, whose connect succeeded, is not marked
    down. Requests the other backend takes are served as usual."""
    silent = make_raw_backend(read_head_then_close)
    good = make_backend("good")
    proxy = start_proxy(silent, good)
    outcomes = []
    for i in range(4):
        before = (silent.connections, good.total_hits)
        r = get(proxy.port, f"/echo?i={i}")
        after = (silent.connections, good.total_hits)
        if after[0] > before[0]:
            assert after[1] == before[1], f"request {i} was sent to both backends"
            assert r.raw == b"" or r.status == 502, \
                f"request {i}: expected no answer or a 502, got {r.raw[:200]!r}"
            outcomes.append("silent")
        else:
            assert after[1] == before[1] + 1, f"request {i} reached no backend: {r!r}"
            assert served_by(r) == "good"
            outcomes.append("good")
    assert sorted(outcomes) == ["good", "good", "silent", "silent"], outcomes
    assert len(silent.received) == 2 and all(b"GET /echo?i=" in req for req in silent.received)
    assert_logged_times(proxy, "is down", 0)


@pytest.mark.stage(5)
@pytest.mark.parametrize("first_down", [False, True], ids=["all-up", "first-down"])
def test_body_sent_at_once_arrives_complete(make_backend, start_proxy, first_down):
    """A client that sends its request and a 1 MiB body right after
    connecting, before the proxy has a backend connection, gets every byte
    to the backend: over a pool of three (each gets one of three uploads),
    and when the backend tried first has its port closed, so that the
    request waits for the failover to the next one."""
    backends = [make_backend(n) for n in "abc"]
    pool = [(LOOPBACK, closed_ports(1)[0])] + backends if first_down else backends
    proxy = start_proxy(*pool, down_time=60)
    for i in range(3):
        body = random.Random(i).randbytes(MiB)
        r = request(proxy.port, f"/echo?upload={i}", method="POST", body=body)
        assert r.status == 200, f"upload {i}: {r!r} {r.raw[:300]!r}"
        seen = r.json()
        assert seen["body_length"] == MiB
        assert_same_bytes(base64.b64decode(seen["body_base64"]), body, f"body of upload {i} the backend received")
    assert [b.hits["/echo"] for b in backends] == [1, 1, 1]
    if first_down:
        assert_logged_once(proxy, went_down(*pool[0]))


@pytest.mark.stage(5)
def test_localhost_backend(make_backend, start_proxy):
    """A backend named localhost:PORT, listening on 127.0.0.1 only, is
    reached (where localhost also resolves to ::1, rsp tries each address
    in turn without marking the backend down)."""
    backend = make_backend("local")
    addresses = {ai[4][0] for ai in socket.getaddrinfo("localhost", backend.port, type=socket.SOCK_STREAM)}
    if LOOPBACK not in addresses:
        pytest.skip(f"localhost does not resolve to {LOOPBACK} here: {addresses}")
    proxy = start_proxy(("localhost", backend.port), down_time=60)
    assert ask(proxy, 3) == ["local"] * 3
    assert_logged_times(proxy, "is down", 0)


class IPv6Backend(RawBackend):
    """A minimal HTTP backend on [::1]: reads a request head and answers
    200 with an X-Backend header naming it. Counts the requests it answered."""

    def __init__(self, name):
        self.name = name
        self.hits = 0
        super().__init__(self._answer, address="::1")

    def _answer(self, conn, backend):
        if b"\r\n\r\n" in read_head(conn):
            with self._lock:
                self.hits += 1
            body = self.name.encode() + b"\n"
            conn.sendall(b"HTTP/1.0 200 OK\r\nX-Backend: %s\r\nContent-Length: %d\r\n\r\n%s"
                         % (self.name.encode(), len(body), body))


@needs_ipv6
@pytest.mark.stage(5)
def test_ipv6_backend(make_backend, start_proxy):
    """A backend given as "[::1]:PORT" is reached over IPv6, and takes
    turns with an IPv4 one."""
    v4 = make_backend("v4")
    v6 = IPv6Backend("v6")
    try:
        proxy = start_proxy(v4, ("::1", v6.port))
        assert_rotation(ask(proxy, 6), ["v4", "v6"])
    finally:
        v6.stop()
    assert v6.hits == 3 and v4.total_hits == 3
    assert_logged_times(proxy, "is down", 0)


# -- listen ----------------------------------------------------------------------------

@pytest.mark.stage(5)
@pytest.mark.parametrize("form", ["number", "string"])
def test_listen_on_port_alone(backend, start_proxy, form):
    """listen = PORT (a number or a string) listens on every address: the
    proxy answers on 127.0.0.1, and on ::1 too where IPv6 is available
    (one dual-stack socket)."""
    port = free_port()
    proxy = start_proxy(backend, port=port, listen=port if form == "number" else str(port))
    assert served_by(get(proxy.port, "/echo", address="127.0.0.1")) == "a"
    if ipv6_loopback_available():
        assert served_by(get(proxy.port, "/echo", address="::1")) == "a"


@pytest.mark.stage(5)
def test_listen_on_ipv4_address(backend, start_proxy):
    """listen = "127.0.0.1:PORT" answers on 127.0.0.1 only."""
    port = free_port()
    proxy = start_proxy(backend, port=port, listen=f"127.0.0.1:{port}")
    assert served_by(get(proxy.port, "/echo", address="127.0.0.1")) == "a"
    if ipv6_loopback_available():
        assert refuses("::1", proxy.port), "listening on 127.0.0.1 also took a client on ::1"


@needs_ipv6
@pytest.mark.stage(5)
def test_listen_on_ipv6_address(backend, start_proxy):
    """listen = "[::1]:PORT" answers on ::1 only."""
    port = free_port()
    proxy = start_proxy(backend, port=port, listen=f"[::1]:{port}")
    assert served_by(get(proxy.port, "/echo", address="::1")) == "a"
    assert refuses("127.0.0.1", proxy.port), "listening on [::1] also took a client on 127.0.0.1"
