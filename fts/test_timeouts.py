"""Timeouts (stage 08): connect_timeout, header_timeout, body_timeout,
response_timeout and idle_timeout.

Each test sets the timeout it is about to a fraction of a second and
checks what the client gets: rsp's own 408 or 504, a silent close, or a
partial response cut off. A timeout must have fired within FIRED_BY
seconds (a generous bound, never a measurement); where the point is that
it did not fire too early, the client's wait is also checked to have
lasted at least NOT_BEFORE (a lower bound with tolerance: the proxy's
clock starts after ours). Each timeout is logged once, naming the client
and the backend; while one is pending, the proxy serves other clients
(a site of its own, slow.test, takes the stalled requests).
"""

import socket
import threading
import time

import pytest

from backends import BlackHole, hold_after_head, read_head, record_request, wait_for_eof
from checks import (assert_config_error, assert_logged_once, assert_logged_times, assert_rsp_page, assert_serves,
                    backend_name, wait_for_log, went_down)
from client import build_request, close_with_reset, connect, get, read_to_eof, request, Response
import netutil
from netutil import LOOPBACK, free_port
from pattern import assert_is_pattern, pattern
from proxy import count_fds, proxy_arguments, run_rsp

TIMEOUT = 0.5            # s: the timeout under test
FIRED_BY = 5.0           # s: it must have fired by then (a bound, not a measurement)
NOT_BEFORE = 0.8 * TIMEOUT  # s: and not before this (tolerance for the clocks' granularity)
LONG = 30                # s: a timeout the test must never reach
POLL_TIMEOUT = 10.0      # s: a bound on waiting for something that must happen

SLOW = "slow.test"       # the site whose backend stalls; everything else goes to the test backend

# A head that never ends: the header line is cut short.
PARTIAL_HEAD = b"GET / HTTP/1.1\r\nHost: a\r\nX-a: "

TIMEOUT_SETTINGS = ("connect_timeout", "header_timeout", "body_timeout", "response_timeout", "idle_timeout")


# -- helpers -----------------------------------------------------------------------

class Waiting:
    """A client that sends `data` and then only reads, in a thread, until
    its connection ends; result() says what it got and how long the
    connection lasted, counted from before the connect (so never less
    than the proxy's own count)."""

    def __init__(self, port, data):
        self.response = self.error = self.ended = None
        self.started = time.monotonic()
        self.sock = connect(port, timeout=FIRED_BY)
        try:
            self.sock.sendall(data)
        except BaseException:
            self.sock.close()
            raise
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        try:
            raw, reset = read_to_eof(self.sock)
            self.response = Response(raw, reset)
        except Exception as e:  # reported by result()
            self.error = e
        finally:
            self.ended = time.monotonic()
            self.sock.close()

    def result(self):
        """(Response, seconds the connection lasted); fails unless the
        connection ended within FIRED_BY."""
        self._thread.join(FIRED_BY + 1)
        assert self.ended is not None, f"the connection was still open after {FIRED_BY + 1} s"
        assert self.error is None, f"the connection did not end within {FIRED_BY} s: {self.error}"
        elapsed = self.ended - self.started
        assert elapsed < FIRED_BY, f"the connection ended only after {elapsed:.2f} s"
        return self.response, elapsed


def stalled(port):
    """A Waiting client that sent a whole GET for the site slow.test."""
    return Waiting(port, build_request(port, "GET", "/stalled", host=SLOW))


def assert_not_early(elapsed, what):
    assert elapsed >= NOT_BEFORE, f"{what} after {elapsed:.2f} s, with a timeout of {TIMEOUT} s"


def assert_timeout_logged(proxy, name, backend=None):
    """One line of the log names timeout `name`, the client, and the
    backend (an object with .host and .port) if given."""
    wait_for_log(proxy, name, POLL_TIMEOUT)
    line = assert_logged_once(proxy, name)
    assert f"client {LOOPBACK}" in line, line
    if backend is not None:
        assert backend_name(backend.host, backend.port) in line, line


def start_with_slow_site(start_proxy, backend, slow, **options):
    """The proxy with `backend` as default site and `slow` as site slow.test."""
    return start_proxy(backend, sites={SLOW: [slow]}, **options)


def serve_meanwhile(proxy, count=3):
    """`count` normal requests, each answered in full."""
    for i in range(count):
        assert_serves(proxy, 1000 + i)


@pytest.fixture
def black_hole():
    hole = BlackHole()
    yield hole
    hole.stop()


# -- header_timeout ------------------------------------------------------------------

@pytest.mark.stage(8)
def test_partial_head_gets_408(backend, start_proxy):
    """A client that sends part of a head and stops gets rsp's 408 page
    (then the close) once header_timeout has passed, not before; the
    timeout is logged once, and other clients are served meanwhile."""
    proxy = start_proxy(backend, header_timeout=TIMEOUT)
    slow = Waiting(proxy.port, PARTIAL_HEAD)
    serve_meanwhile(proxy)
    r, elapsed = slow.result()
    assert_rsp_page(r, 408, "Request Timeout")
    assert_not_early(elapsed, "408")
    assert backend.total_hits == 3, "the partial head reached the backend"
    assert_timeout_logged(proxy, "header_timeout")


@pytest.mark.stage(8)
def test_trickled_head_gets_408_from_its_start(backend, start_proxy):
    """header_timeout bounds the whole head, not the pause between two
    bytes: a client trickling a header line a byte every 0.05 s (it would
    never end) still gets a 408 within the bound."""
    proxy = start_proxy(backend, header_timeout=TIMEOUT)
    with connect(proxy.port, timeout=FIRED_BY) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(PARTIAL_HEAD)
        deadline = time.monotonic() + FIRED_BY
        sock.settimeout(0.05)
        raw = b""
        while not raw and time.monotonic() < deadline:
            try:
                sock.sendall(b"a")
                raw = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break  # the proxy closed: read what it sent
        sock.settimeout(FIRED_BY)
        rest, reset = read_to_eof(sock)
    # The close may come as a reset: a byte of the trickle can arrive
    # after the proxy stopped reading.
    r = Response(raw + rest, reset)
    assert r.status == 408, f"expected a 408 within {FIRED_BY} s, got {r.raw[:300]!r}"
    assert_timeout_logged(proxy, "header_timeout")


@pytest.mark.stage(8)
def test_head_completed_in_time_is_served(backend, start_proxy):
    """A head sent in ten pieces over about 0.5 s, within a header_timeout
    of 1.5 s, is served normally; nothing is logged as timed out."""
    proxy = start_proxy(backend, header_timeout=3 * TIMEOUT)
    data = build_request(proxy.port, "GET", "/echo?trickled=1")
    with connect(proxy.port) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        step = len(data) // 10 + 1
        for i in range(0, len(data), step):
            sock.sendall(data[i:i + step])
            time.sleep(TIMEOUT / 10)
        r = Response(*read_to_eof(sock))
    assert r.status == 200 and r.json()["path"] == "/echo?trickled=1", r.raw[:300]
    assert_logged_times(proxy, "header_timeout", 0)


@pytest.mark.stage(8)
def test_silent_connection_closed_without_a_word(backend, start_proxy):
    """A connection that sends nothing is closed after header_timeout (not
    before) without a byte and with a FIN, not a reset; this is not
    logged; other clients are served meanwhile."""
    proxy = start_proxy(backend, header_timeout=TIMEOUT)
    silent = Waiting(proxy.port, b"")
    serve_meanwhile(proxy)
    r, elapsed = silent.result()
    assert r.raw == b"", f"a silent connection got {r.raw[:300]!r}"
    assert not r.reset, "the silent connection was reset instead of closed"
    assert_not_early(elapsed, "closed")
    assert_logged_times(proxy, "header_timeout", 0)


# -- body_timeout --------------------------------------------------------------------

@pytest.mark.stage(8)
def test_stalled_body_gets_408(backend, make_raw_backend, start_proxy, stage):
    """A POST whose body stops after 100 of 1000 bytes, to a backend that
    reads the head and waits: rsp answers 408 once body_timeout has
    passed, not before, and closes; the backend got the request (one
    connection); the timeout is logged once with the client and that
    backend; other clients are served meanwhile. From stage 17, which
    reads a body whole before choosing a backend, the backend got nothing
    at all (no connection) and the log names none."""
    holder = make_raw_backend(hold_after_head)
    proxy = start_with_slow_site(start_proxy, backend, holder, body_timeout=TIMEOUT)
    whole = build_request(proxy.port, "POST", "/upload", body=pattern(1000), host=SLOW)
    slow = Waiting(proxy.port, whole[:-900])
    serve_meanwhile(proxy)
    r, elapsed = slow.result()
    assert_rsp_page(r, 408, "Request Timeout")
    assert_not_early(elapsed, "408")
    if stage >= 17:
        assert holder.connections == 0, "the backend was connected before the body was in"
        assert_timeout_logged(proxy, "body_timeout")
        assert "backend none" in assert_logged_once(proxy, "body_timeout")
        return
    assert holder.connections == 1
    assert len(holder.received) == 1 and holder.received[0].startswith(b"POST /upload "), holder.received
    assert_timeout_logged(proxy, "body_timeout", holder)


@pytest.mark.stage(8)
def test_body_with_short_pauses_is_not_cut(make_raw_backend, start_proxy):
    """body_timeout bounds the pause between two pieces of a body, not the
    whole body: 8 pieces 0.2 s apart (1.6 s in all) with body_timeout 1
    arrive complete, and the backend's answer comes back."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder, body_timeout=2 * TIMEOUT)
    body = pattern(8 * 1000)
    whole = build_request(proxy.port, "POST", "/upload", body=body)
    with connect(proxy.port) as sock:
        sock.sendall(whole[:-len(body)])
        for i in range(0, len(body), 1000):
            time.sleep(0.2)
            sock.sendall(body[i:i + 1000])
        r = Response(*read_to_eof(sock))
    assert r.status == 200, r.raw[:300]
    assert r.json()["body_length"] == len(body)
    assert_logged_times(proxy, "body_timeout", 0)


# -- response_timeout ----------------------------------------------------------------

@pytest.mark.stage(8)
def test_backend_that_never_answers_gets_504(backend, make_raw_backend, start_proxy):
    """A backend that reads the request and never answers: once
    response_timeout has passed (not before) the client gets rsp's 504
    page; the request is not sent to another backend; the timeout is
    logged once with the client and the backend; other clients are served
    meanwhile."""
    holder = make_raw_backend(hold_after_head)
    proxy = start_with_slow_site(start_proxy, backend, holder, response_timeout=TIMEOUT)
    slow = stalled(proxy.port)
    serve_meanwhile(proxy)
    r, elapsed = slow.result()
    assert_rsp_page(r, 504, "Gateway Timeout")
    assert_not_early(elapsed, "504")
    assert holder.connections == 1, f"the request was tried {holder.connections} times"
    assert backend.total_hits == 3, "the stalled request was also sent to the other backend"
    assert_timeout_logged(proxy, "response_timeout", holder)


@pytest.mark.stage(8)
def test_slow_but_answering_backend_is_not_cut(backend, start_proxy):
    """A backend that begins its answer after 0.5 s, within a
    response_timeout of 1.5 s, is passed through whole."""
    proxy = start_proxy(backend, response_timeout=3 * TIMEOUT)
    r = get(proxy.port, f"/bytes?n=3000&delay={TIMEOUT}")
    assert r.status == 200, r.raw[:300]
    assert_is_pattern(r.body, 3000)
    assert_logged_times(proxy, "response_timeout", 0)


# -- idle_timeout --------------------------------------------------------------------

def answer_part_then_stall(conn, backend):
    """Reads a request head, sends a 200 announcing 1000 bytes and only the
    first 100 of them, then sends nothing more (until the peer closes)."""
    read_head(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nX-Backend: staller\r\n\r\n" + pattern(100))
    wait_for_eof(conn)


@pytest.mark.stage(8)
def test_stalled_response_closed_after_idle_timeout(backend, make_raw_backend, start_proxy):
    """A backend that sends a head and 100 of its 1000 bytes, then stalls:
    the client gets those bytes, then the end of the connection once
    idle_timeout has passed without a byte either way (not before); the
    timeout is logged once with the client and the backend; other clients
    are served meanwhile."""
    staller = make_raw_backend(answer_part_then_stall)
    proxy = start_with_slow_site(start_proxy, backend, staller, idle_timeout=TIMEOUT)
    slow = stalled(proxy.port)
    serve_meanwhile(proxy)
    r, elapsed = slow.result()
    assert r.status == 200 and r.header("X-Backend") == "staller", r.raw[:300]
    assert r.body == pattern(100), f"{len(r.body)} bytes of body"
    assert_not_early(elapsed, "closed")
    assert_timeout_logged(proxy, "idle_timeout", staller)


@pytest.mark.stage(8)
def test_dripping_response_is_not_cut(backend, start_proxy):
    """idle_timeout bounds silence, not the whole exchange: a response
    dripping 8 pieces 0.2 s apart (1.6 s in all) with idle_timeout 1
    arrives complete."""
    proxy = start_proxy(backend, idle_timeout=2 * TIMEOUT)
    r = get(proxy.port, "/drip?chunks=8&size=500&delay=0.2")
    assert r.status == 200, r.raw[:300]
    assert_is_pattern(r.body, 8 * 500)
    assert_logged_times(proxy, "idle_timeout", 0)


# -- connect_timeout -----------------------------------------------------------------

@pytest.mark.stage(8)
def test_connect_timeout_fails_over(make_backend, start_proxy, black_hole):
    """Round robin over a good backend and one whose connects hang: every
    request gets a 200 from the good one (the one sent to the black hole
    fails over after connect_timeout); the timeout is logged once, and
    passive health marks the black hole down, once, saying it timed out."""
    good = make_backend("good")
    proxy = start_proxy(good, black_hole, connect_timeout=TIMEOUT, down_time=60)
    for i in range(4):
        r = get(proxy.port, f"/echo?i={i}")
        assert r.status == 200 and r.json()["backend"] == "good", r.raw[:300]
    assert good.hits["/echo"] == 4
    assert_timeout_logged(proxy, "connect_timeout", black_hole)
    line = assert_logged_once(proxy, went_down(black_hole.host, black_hole.port))
    assert "timed out" in line, line


@pytest.mark.stage(8)
def test_connect_timeout_with_nothing_left_gets_504(backend, start_proxy, black_hole):
    """A site whose only backend's connects hang: the client gets rsp's 504
    page once connect_timeout has passed (not before); the timeout is
    logged once with the client and the backend; other clients are served
    meanwhile."""
    proxy = start_with_slow_site(start_proxy, backend, black_hole, connect_timeout=TIMEOUT)
    slow = stalled(proxy.port)
    serve_meanwhile(proxy)
    r, elapsed = slow.result()
    assert_rsp_page(r, 504, "Gateway Timeout")
    assert_not_early(elapsed, "504")
    assert_timeout_logged(proxy, "connect_timeout", black_hole)
    assert_logged_once(proxy, went_down(black_hole.host, black_hole.port))


@pytest.mark.stage(8)
def test_client_reset_during_connect_is_noticed(start_proxy, black_hole):
    """A client that sends its request and resets (SO_LINGER 0) while the
    connect to its backend hangs (connect_timeout 30 s): rsp lets go of
    both sockets at once, long before the connect would time out."""
    proxy = start_proxy(black_hole, connect_timeout=LONG)
    sock = connect(proxy.port)
    try:
        sock.sendall(build_request(proxy.port, "GET", "/echo"))
        netutil.wait_for(lambda: count_fds(proxy.pid) >= proxy.baseline_fds + 2,
                         "the proxy holding the client and a backend socket", POLL_TIMEOUT)
    finally:
        close_with_reset(sock)
    netutil.wait_for(lambda: count_fds(proxy.pid) <= proxy.baseline_fds,
                     f"the proxy back to its {proxy.baseline_fds} fds of startup", FIRED_BY)
    assert proxy.alive()
    assert_logged_times(proxy, "connect_timeout", 0)


@pytest.mark.stage(8)
def test_half_close_during_connect_still_answered(make_backend, start_proxy, black_hole):
    """A client that half-closes (shutdown SHUT_WR) right after its request
    still gets its whole answer, also when the request waits for a connect
    that times out and fails over: of two requests over a black hole and a
    good backend (round robin), one goes through the black hole first."""
    good = make_backend("good")
    proxy = start_proxy(black_hole, good, connect_timeout=TIMEOUT, down_time=60)
    for i in range(2):
        r = request(proxy.port, f"/bytes?n={20000 + i}", half_close=True)
        assert r.status == 200 and r.header("X-Backend") == "good", r.raw[:300]
        assert_is_pattern(r.body, 20000 + i)
    assert_timeout_logged(proxy, "connect_timeout", black_hole)


# -- the settings --------------------------------------------------------------------

B = (LOOPBACK, 1)  # a backend address nothing has to answer at: these configs never serve

BAD_VALUES = [("zero", 0), ("negative", -1), ("below-a-millisecond", 0.0009), ("over-a-day", 86400.5),
              ("string", "5"), ("boolean", True)]


@pytest.mark.stage(8)
@pytest.mark.parametrize("value", [v for _, v in BAD_VALUES], ids=[i for i, _ in BAD_VALUES])
@pytest.mark.parametrize("setting", TIMEOUT_SETTINGS)
def test_bad_timeout(rsp, tmp_path, setting, value):
    """A timeout that is not a number of seconds from 0.001 to 86400 is a
    config error: a non-zero exit status and one line on stderr naming
    the file and the setting; nothing on stdout."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), {setting: value})
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, setting, quoted=False, status=None)


@pytest.mark.stage(8)
@pytest.mark.parametrize("value", [0.001, 86400], ids=["smallest", "largest"])
def test_timeout_limits_accepted(backend, start_proxy, value):
    """Every timeout at its smallest (0.001 s) or largest (a day) is
    accepted; with a day, requests are served as usual."""
    proxy = start_proxy(backend, **{setting: value for setting in TIMEOUT_SETTINGS})
    if value >= 1:
        assert_serves(proxy)
