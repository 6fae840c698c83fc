"""Pipelining against clients that read slowly or not at all (stage 09).

A response is finished, for rsp, once its last byte is queued for the
client; that is not when the client has it. rsp starts the next
pipelined exchange only once the client has taken what was queued for it
down to the low-water mark (and, from stage 16, once no pipe holds bytes
for it), so that a client that pipelines a thousand requests and never
reads costs a bounded amount of memory, whether the answers come from a
backend or from rsp itself; and a client that reads slowly still gets
every response, whole and in order.

Memory is judged by the proxy's resident set size (VmRSS), never by time:
it is sampled until rsp has done all it will do, that is until nothing
moves any more (the requests the backend got, the bytes rsp wrote, the
bytes the clients could send) for SETTLE seconds.
"""

import socket
import time

import pytest

from client import Reader, connect, get, read_framed_response, request_bytes
from pattern import assert_is_pattern
from proxy import is_sanitized, vm_rss

pytestmark = pytest.mark.stage(9)

KiB = 1024
MiB = 1024 * KiB

CONNECTIONS = 20        # clients pipelining at once
RCVBUF = 4 * KiB        # their SO_RCVBUF: the window they offer stays small
SITE = "ka.test"        # the site the backend serves; any other Host gets rsp's own 421

# The backend's page: a little under 16 KiB, so that with its head it
# arrives in one read of rsp's (16 KiB): each response is then whole
# before rsp looks at the client's queue, and backpressure alone cannot
# stop the next one.
PAGE = 16000
PAGES = 999             # requests each client pipelines for it, in one write

# rsp's own answers: a 421 for a host nobody serves is some 270 bytes,
# and keepalive_requests (1000 by default) ends a connection after 1000
# of them: the kernel's send buffer of the socket (tcp_wmem lets it grow
# to 4 MiB) takes them all and rsp's memory never sees them. With the
# limit raised, 40,000 do not fit; each client sends as many of them as
# the proxy takes. A route() answer of a page's size needs no such help.
OWN_ANSWERS = 40000
ROUTE = f"""
local page = string.rep("x", {PAGE})
function route(req)
  if req.path == "/own" then return {{ status = 200, body = page }} end
end
"""
OWN_CASES = {
    "421": (b"GET / HTTP/1.1\r\nHost: nowhere.test\r\n\r\n", OWN_ANSWERS, {"keepalive_requests": 100000}),
    "route": (f"GET /own HTTP/1.1\r\nHost: {SITE}\r\n\r\n".encode(), PAGES, {"route": ROUTE}),
}

# What rsp may hold for one such client. Its queue is under the low-water
# mark (16 KiB) when an exchange starts, and the backend is read only
# while the queue is under the high-water mark (64 KiB), at most one read
# (16 KiB) past it: 80 KiB, in a buffer of up to 128 KiB (buffers double
# as they grow). The requests it sent and we have not used wait in the
# head buffer: up to max_request_head (32 KiB) and one read past it, in
# up to 64 KiB. The parser's state and the relay take a few KiB. That is
# under 200 KiB; 512 KiB leaves a wide margin for the allocator. Without
# the rule a client holds every answer the kernel's socket buffer did not
# take: some 12 MiB of pages for the first test, some 7 MiB of 421s for
# the second (all 20: over 100 MiB).
PER_CONNECTION = 512 * KiB
RSS_GROWTH_LIMIT = CONNECTIONS * PER_CONNECTION

SETTLE = 1.0            # s without any progress: rsp has done all it will
POLL_TIMEOUT = 90.0     # s: a guard on settling (rsp must not work forever)
SAMPLE = 0.05           # s between two looks


def written_by(pid):
    """The bytes process `pid` has written so far (wchar: every write and
    send, sockets included)."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise AssertionError(f"no wchar line in /proc/{pid}/io")


def send_some(socks, data, sent):
    """Sends, without blocking, what each socket takes of `data` beyond
    what it already took (sent[i] bytes). Returns the bytes sent now."""
    moved = 0
    for i, sock in enumerate(socks):
        while sent[i] < len(data):
            try:
                n = sock.send(data[sent[i]:sent[i] + 256 * KiB], socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            sent[i] += n
            moved += n
    return moved


def pipeline_and_never_read(proxy, request, count, progress=lambda: 0):
    """CONNECTIONS clients each pipeline `count` copies of `request` (as
    many as the proxy takes) and read nothing. Returns (their sockets, the
    highest VmRSS seen until rsp settled, the bytes each could send)."""
    data = request * count
    socks = [connect(proxy.port, rcvbuf=RCVBUF) for _ in range(CONNECTIONS)]
    sent = [0] * CONNECTIONS
    highest = 0
    last, last_change = None, time.monotonic()
    deadline = time.monotonic() + POLL_TIMEOUT
    try:
        while True:
            send_some(socks, data, sent)
            highest = max(highest, vm_rss(proxy.pid))
            now = (progress(), written_by(proxy.pid), sum(sent))
            if now != last:
                last, last_change = now, time.monotonic()
            elif time.monotonic() - last_change > SETTLE:
                break
            assert time.monotonic() < deadline, (
                f"rsp was still at work after {POLL_TIMEOUT} s (written {now[1]} bytes, clients sent {now[2]})")
            time.sleep(SAMPLE)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks, highest, sent


def assert_growth_bounded(proxy, before, highest, what):
    """VmRSS grew by less than RSS_GROWTH_LIMIT (not judged under
    AddressSanitizer, whose quarantine keeps what rsp frees)."""
    growth = highest - before
    if is_sanitized(proxy.binary):
        return
    assert growth < RSS_GROWTH_LIMIT, (
        f"{what}: the proxy's RSS grew by {growth / MiB:.1f} MiB ({before // KiB} KiB before, "
        f"{highest // KiB} KiB at most; limit {RSS_GROWTH_LIMIT // MiB} MiB for {CONNECTIONS} "
        f"connections, {PER_CONNECTION // KiB} KiB each)")


def assert_serves_after(proxy, host=SITE):
    r = get(proxy.port, "/cl?size=1000", host=host)
    assert r.status == 200 and r.header("X-Backend") == "ka", f"{r!r} {r.raw[:300]!r}"
    assert_is_pattern(r.body, 1000)


@pytest.fixture
def ka(make_keepalive_backend):
    return make_keepalive_backend("ka")


@pytest.fixture
def proxy(ka, start_proxy):
    return start_proxy(sites={SITE: [ka]})


def test_pipelining_non_readers_cost_bounded_memory(ka, proxy):
    """20 clients with a small receive buffer each pipeline 999 requests
    for a page of 16,000 bytes in one write and never read. rsp's RSS
    grows by less than 512 KiB a client (the water marks and the head
    buffer, with a wide margin), the backend is asked for only some of the
    pages, and once the clients are gone rsp serves a normal request."""
    before = vm_rss(proxy.pid)
    request = f"GET /cl?size={PAGE} HTTP/1.1\r\nHost: {SITE}\r\n\r\n".encode()
    socks, highest, sent = pipeline_and_never_read(proxy, request, PAGES, lambda: ka.requests)
    try:
        assert sent == [len(request) * PAGES] * CONNECTIONS, f"the clients could not send it all: {sent}"
        assert_growth_bounded(proxy, before, highest, f"{CONNECTIONS} clients pipelining {PAGES} requests, never reading")
        assert ka.requests < CONNECTIONS * PAGES, "every page was fetched for clients that read none"
    finally:
        for sock in socks:
            sock.close()
    assert_serves_after(proxy)


@pytest.mark.parametrize("case", sorted(OWN_CASES))
def test_pipelined_own_answers_cost_bounded_memory(ka, start_proxy, case):
    """The same with answers rsp writes itself: 20 clients pipeline
    requests that rsp answers without the backend (421 for a host nobody
    serves, 40,000 of them with keepalive_requests raised; or route()
    answering a page, 999 of them) and never read; rsp's RSS grows by
    less than 512 KiB a client (it stops reading them too), and once they
    are gone it serves a normal request."""
    request, count, options = OWN_CASES[case]
    proxy = start_proxy(sites={SITE: [ka]}, **options)
    before = vm_rss(proxy.pid)
    socks, highest, sent = pipeline_and_never_read(proxy, request, count)
    try:
        assert_growth_bounded(proxy, before, highest,
                              f"{CONNECTIONS} clients pipelining {count} requests rsp answers itself ({case}), "
                              f"never reading")
    finally:
        for sock in socks:
            sock.close()
    assert ka.requests == 0, f"the backend got {ka.requests} requests rsp should have answered"
    assert_serves_after(proxy)


class SlowReader(Reader):
    """A Reader that takes at most `size` bytes a read and pauses `delay`
    seconds after each: a client that reads slowly."""

    def __init__(self, sock, size, delay):
        super().__init__(sock)
        self.size, self.delay = size, delay

    def fill(self, what="bytes"):
        if self.eof:
            return False
        try:
            chunk = self.sock.recv(self.size)
        except ConnectionResetError:
            self.eof = self.reset = True
            return False
        except socket.timeout:
            raise TimeoutError(f"nothing arrived for {self.sock.gettimeout()} s while reading {what}") from None
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        time.sleep(self.delay)
        return True


def test_slow_reader_gets_every_pipelined_response_in_order(ka, proxy):
    """A client pipelines 200 requests (one in ten for a host nobody
    serves, which rsp answers 421 itself), waits, then reads them slowly,
    a few KiB at a time: every response arrives whole and in order, each
    page carrying its own request's tag, and the connection still serves
    a request after them."""
    tagged = [f"/tagged?tag=r{i}&size={PAGE}" for i in range(200)]
    wanted = [None if i % 10 == 9 else i for i in range(200)]
    data = b"".join(request_bytes("GET", "/elsewhere", host="nowhere.test") if i is None
                    else request_bytes("GET", tagged[i], host=SITE) for i in wanted)
    with connect(proxy.port, rcvbuf=RCVBUF) as sock:
        reader = SlowReader(sock, 4 * KiB, 0.001)
        sock.sendall(data)
        time.sleep(0.5)  # the client's own pace: it reads nothing yet
        for n, i in enumerate(wanted):
            r = read_framed_response(reader)
            assert r.complete and r.status is not None, f"response {n} was cut short: {r!r} {r.raw[:300]!r}"
            if i is None:
                assert r.status == 421, f"response {n}: expected rsp's 421, got {r!r} {r.raw[:300]!r}"
                continue
            assert r.status == 200, f"response {n}: {r!r} {r.raw[:300]!r}"
            tag = f"tag=r{i}\n".encode()
            assert r.body.startswith(tag), f"response {n} should carry {tag!r}, not {r.body[:20]!r}"
            assert len(r.body) == PAGE, f"response {n}: {len(r.body)} bytes, not {PAGE}"
            assert_is_pattern(r.body[len(tag):], PAGE - len(tag))
        assert not reader.buf, f"more than 200 responses: {bytes(reader.buf[:300])!r}"
        sock.sendall(request_bytes("GET", "/cl?size=1000", host=SITE))
        r = read_framed_response(reader)
        assert r.status == 200 and r.complete, f"{r!r} {r.raw[:300]!r}"
        assert_is_pattern(r.body, 1000)
    assert [rec.target for rec in ka.records[:180]] == [tagged[i] for i in wanted if i is not None]

