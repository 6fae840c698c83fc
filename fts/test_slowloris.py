"""Stage 08 under load: a slowloris of 2,000 connections that each send
part of a head and stop, cut off by header_timeout while normal clients
are served; and a storm of connections whose client and backend close at
the same moment (events for a connection closed earlier in the same
epoll batch must not touch freed memory: run it against a sanitizer
build too).

Counts are fixed; the only bounds are generous ones on waiting.
"""

import selectors
import socket
import threading
import time

import pytest

from backends import read_head
from checks import assert_serves, skip_without_fds, wait_idle
from client import build_request, close_with_reset, connect, get, read_to_eof, Response
from proxy import is_sanitized, raised_fd_limit, vm_rss

MiB = 1024 * 1024

SLOWLORIS = 2000
PARTIAL_HEAD = b"GET / HTTP/1.1\r\nHost: a\r\nX-a: "
HEADER_TIMEOUT = 2.0     # s
SLACK = 15.0             # s: every slowloris connection must have ended by HEADER_TIMEOUT + SLACK after it opened
FDS_NEEDED = SLOWLORIS + 300  # this process: the slowloris sockets, the normal clients, the backend
FDS_WANTED = 4096
RSS_MARGIN = 4 * MiB     # what 2,000 connections come and gone may leave on the proxy's RSS
POLL_TIMEOUT = 30.0      # s: a bound on waiting for something that must happen

STORM_ROUNDS = 5
STORM_CLIENTS = 200      # at once, per round


@pytest.fixture(scope="module", autouse=True)
def many_fds():
    """Raises this process's soft RLIMIT_NOFILE for the module; the proxy
    inherits it."""
    with raised_fd_limit(FDS_WANTED):
        yield


class Served:
    """Normal requests, one after another in a thread, until stop():
    counts them and keeps the first failure."""

    def __init__(self, proxy):
        self.proxy = proxy
        self.count = 0
        self.failure = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                assert_serves(self.proxy, 1000 + self.count % 100)
            except BaseException as e:  # reported by stop()
                self.failure = e
                return
            self.count += 1
            time.sleep(0.01)

    def stop(self):
        """Stops the requests; fails if one of them failed or none was made."""
        self._stop.set()
        self._thread.join(POLL_TIMEOUT)
        assert not self._thread.is_alive(), "a normal request hung"
        if self.failure is not None:
            raise AssertionError(f"a normal request failed after {self.count} served: {self.failure}")
        assert self.count > 0, "no normal request was served"
        return self.count


def read_until_all_end(socks, deadline):
    """Reads every socket in `socks` until it ends or `deadline` passes.
    Returns {socket: (bytes received, reset)} for those that ended."""
    received = {sock: bytearray() for sock in socks}
    ended = {}
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        while len(ended) < len(socks) and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.1):
                sock = key.fileobj
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    ended[sock] = (bytes(received[sock]), True)
                    selector.unregister(sock)
                    continue
                if chunk:
                    received[sock] += chunk
                else:
                    ended[sock] = (bytes(received[sock]), False)
                    selector.unregister(sock)
    return ended


@pytest.mark.stage(8)
@pytest.mark.timeout(120)
def test_slowloris_is_cut_off(backend, start_proxy):
    """2,000 connections each send `GET / HTTP/1.1`, a Host and the start
    of a header line, and nothing more. Normal requests keep getting their
    200 throughout; every slowloris connection gets rsp's 408 and is closed
    within header_timeout (2 s) plus generous slack; afterwards the proxy
    holds as many fds as at startup and (without AddressSanitizer, whose
    allocator keeps freed memory) its RSS is back within 4 MiB of what it
    was after a warm-up."""
    skip_without_fds(FDS_NEEDED)
    proxy = start_proxy(backend, header_timeout=HEADER_TIMEOUT)
    for i in range(20):
        assert_serves(proxy, 1000 + i)
    rss_before = vm_rss(proxy.pid)
    served = Served(proxy)
    socks = []
    try:
        try:
            for _ in range(SLOWLORIS):
                sock = connect(proxy.port)
                socks.append(sock)
                sock.sendall(PARTIAL_HEAD)
        except BaseException:
            served.stop()
            raise
        opened = time.monotonic()
        ended = read_until_all_end(socks, opened + HEADER_TIMEOUT + SLACK)
        served.stop()
        assert len(ended) == SLOWLORIS, (f"{SLOWLORIS - len(ended)} of {SLOWLORIS} slowloris connections were still "
                                         f"open {HEADER_TIMEOUT + SLACK} s after the last one opened")
        answers = [Response(raw, reset) for raw, reset in ended.values()]
        not_408 = [r for r in answers if r.status != 408]
        assert not not_408, (f"{len(not_408)} of {SLOWLORIS} slowloris connections got no 408, e.g. "
                             f"{not_408[0]!r} {not_408[0].raw[:200]!r}")
    finally:
        for sock in socks:
            sock.close()
    assert_serves(proxy)
    wait_idle(proxy, POLL_TIMEOUT)
    if not is_sanitized(proxy.binary):
        rss_after = vm_rss(proxy.pid)
        assert rss_after - rss_before < RSS_MARGIN, (
            f"the proxy's RSS is {rss_after // 1024} KiB after the slowloris, "
            f"{rss_before // 1024} KiB before it")


def answer_and_close(conn, backend):
    """Reads a request head, answers it at once and closes; with a RST
    instead of a FIN if the target contains "rst"."""
    head = read_head(conn)
    body = b"bye\n"
    try:
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\nX-Backend: closer\r\n\r\n%s" % (len(body), body))
    finally:
        if b"rst" in head.split(b"\r\n", 1)[0]:
            close_with_reset(conn)


@pytest.mark.stage(8)
@pytest.mark.timeout(120)
def test_client_and_backend_close_at_once(make_raw_backend, start_proxy):
    """Five rounds of 200 connections opened at once, all to a backend
    that answers as soon as it has the head and closes (half of the time
    with a RST): three in four clients send a request and close at once
    (a RST, a FIN, or a RST before the head is even complete), the fourth
    half-closes and reads its answer, which must be whole. The proxy
    survives (on a sanitizer build: without a report), serves the next
    request, and gives back every fd."""
    skip_without_fds(2 * STORM_CLIENTS + 300)
    closer = make_raw_backend(answer_and_close)
    proxy = start_proxy(closer, header_timeout=POLL_TIMEOUT)
    readers_answered = 0
    for round_ in range(STORM_ROUNDS):
        socks = [connect(proxy.port) for _ in range(STORM_CLIENTS)]
        readers = []
        try:
            for i, sock in enumerate(socks):
                kind = i % 4
                target = f"/{'rst' if i % 8 < 4 else 'fin'}?round={round_}&i={i}"
                data = build_request(proxy.port, "GET", target)
                if kind == 2:
                    data = data[:len(data) // 2]
                try:
                    sock.sendall(data)
                except OSError:
                    pass
                if kind == 0 or kind == 2:
                    close_with_reset(sock)
                elif kind == 1:
                    sock.close()
                else:
                    sock.shutdown(socket.SHUT_WR)
                    readers.append(sock)
            for sock in readers:
                r = Response(*read_to_eof(sock))
                assert r.status == 200 and r.body == b"bye\n", f"round {round_}: {r!r} {r.raw[:200]!r}"
                readers_answered += 1
        finally:
            for sock in socks:
                sock.close()
        assert proxy.alive(), f"the proxy died in round {round_}"
    assert readers_answered == STORM_ROUNDS * STORM_CLIENTS // 4
    r = get(proxy.port, "/fin?after=1")
    assert r.status == 200 and r.body == b"bye\n", r.raw[:200]
    wait_idle(proxy, POLL_TIMEOUT)
