"""Write buffering and backpressure (chapter 04): a slow or paused peer costs
the proxy a bounded amount of memory, never a byte of data; the two
directions of a pair end on their own; peers that go away at any moment
leave nothing behind.

Large bodies are checked as they stream in (against the shared pattern),
so that hundreds of MiB never sit in the test's memory. Memory is judged
by the proxy's resident set size (VmRSS), never by time.
"""

import hashlib
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends import read_head
from checks import assert_serves
from client import build_request, close_with_reset, connect, get, read_to_eof, recv_or_reset, Response
from pattern import assert_is_pattern, first_difference, pattern, pattern_chunks
from proxy import large_bodies, vm_rss

KiB = 1024
MiB = 1024 * KiB

# What a paused transfer may add to the proxy's resident memory. Stage 04
# holds at most about 64 KiB per direction; the margin is for the
# allocator and the stack, not for a copy of the body.
RSS_GROWTH_LIMIT = 8 * MiB
PAUSE = 2.0            # how long a paused peer holds a transfer
RSS_SAMPLES = 8        # VmRSS readings taken during the pause

DROPS = "a write that would block (EAGAIN) or is short drops the bytes not written"
CLOSES_AT_EOF = "the pair is closed as soon as either side reaches EOF"


# -- helpers -------------------------------------------------------------------


def max_rss_during(pid, seconds, samples=RSS_SAMPLES):
    """Samples the VmRSS of `pid` evenly over `seconds`; returns the largest."""
    highest = 0
    for _ in range(samples):
        time.sleep(seconds / samples)
        highest = max(highest, vm_rss(pid))
    return highest


def assert_rss_bounded(before, during, what):
    growth = during - before
    assert growth < RSS_GROWTH_LIMIT, (
        f"{what}: the proxy's RSS grew by {growth / MiB:.1f} MiB "
        f"({before // KiB} KiB before, {during // KiB} KiB at most during the pause; "
        f"limit {RSS_GROWTH_LIMIT // MiB} MiB)")


class Streamed:
    """A response read to EOF with its body checked against the pattern
    on the fly: status (None if no complete head arrived, -1 if it was not
    HTTP), body_length, mismatch (offset of the first body byte that is
    not the pattern's, or None), reset, received (all bytes, head too)."""

    def __init__(self, status, body_length, mismatch, reset, received):
        self.status = status
        self.body_length = body_length
        self.mismatch = mismatch
        self.reset = reset
        self.received = received

    def assert_pattern(self, length, what="body"):
        """The body was exactly pattern(length); a short message otherwise."""
        assert self.status == 200, f"{what}: status {self.status!r} ({self.received} bytes received in all)"
        if self.mismatch is not None or self.body_length != length:
            at = self.mismatch if self.mismatch is not None else min(self.body_length, length)
            raise AssertionError(
                f"{what}: got {self.body_length} bytes, expected {length}; "
                f"first difference at offset {at}" + (" (ended with a reset)" if self.reset else ""))

    def __repr__(self):
        return (f"<Streamed status={self.status} body={self.body_length} bytes "
                f"mismatch={self.mismatch} reset={self.reset} received={self.received}>")


def read_pattern_response(sock, read_size=MiB):
    """Reads an HTTP response until EOF (a reset ends it too), checking
    the body against the pattern as it arrives. Returns a Streamed."""
    head = b""
    status, length, mismatch, reset, received = None, 0, None, False, 0

    def check(data):
        nonlocal length, mismatch
        if mismatch is None:
            expected = pattern(len(data), offset=length)
            if data != expected:
                mismatch = length + first_difference(data, expected)
        length += len(data)

    while True:
        chunk = recv_or_reset(sock, read_size, length, "body bytes")
        if chunk is None:
            reset = True
            break
        if not chunk:
            break
        received += len(chunk)
        if status is None:
            head += chunk
            end = head.find(b"\r\n\r\n")
            if end == -1:
                continue
            status = Response(head[:end + 4]).status or -1
            chunk, head = head[end + 4:], None
        check(chunk)
    return Streamed(status, length, mismatch, reset, received)


_sha256_cache = {}


def pattern_sha256(length):
    """The SHA-256 of pattern(length), computed by streaming."""
    if length not in _sha256_cache:
        digest = hashlib.sha256()
        for chunk in pattern_chunks(length):
            digest.update(chunk)
        _sha256_cache[length] = digest.hexdigest()
    return _sha256_cache[length]


def upload_head(port, path, length):
    """The head of a POST announcing a `length`-byte body (sent apart)."""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n").encode()


def send_pattern_upload(sock, port, path, length):
    """Sends a POST of pattern(length), streamed from pattern_chunks."""
    sock.sendall(upload_head(port, path, length))
    for chunk in pattern_chunks(length):
        sock.sendall(chunk)


# -- bounded memory --------------------------------------------------------------

@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, DROPS)
def test_paused_200mib_download_costs_bounded_memory(proxy):
    """A client that sends its request for 200 MiB and then does not read
    for two seconds costs the proxy less than 8 MiB of resident memory
    (backpressure: it stops reading the backend instead of queueing the
    body), and once the client reads, all 200 MiB arrive byte for byte."""
    n = 200 * MiB
    before = vm_rss(proxy.pid)
    with connect(proxy.port) as sock:
        sock.sendall(build_request(proxy.port, "GET", f"/bytes?n={n}"))
        during = max_rss_during(proxy.pid, PAUSE)
        r = read_pattern_response(sock)
    assert_rss_bounded(before, during, "200 MiB download paused by the client")
    r.assert_pattern(n)


@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, DROPS)
def test_upload_to_paused_backend_costs_bounded_memory(backend, start_proxy, stage):
    """A client uploading 64 MiB to a backend that waits before reading
    costs the proxy less than 8 MiB of resident memory while the backend
    waits (backpressure towards the client), and then the backend gets
    every byte (length and SHA-256)."""
    proxy = start_proxy(backend, **large_bodies(stage))
    n = 64 * MiB
    expected_sha256 = pattern_sha256(n)
    before = vm_rss(proxy.pid)
    with connect(proxy.port) as sock:
        failure = []

        def upload():
            try:
                send_pattern_upload(sock, proxy.port, f"/upload?delay={PAUSE + 0.5}&patience=2", n)
            except OSError as e:
                failure.append(e)

        sender = threading.Thread(target=upload, daemon=True)
        sender.start()
        during = max_rss_during(proxy.pid, PAUSE)
        sender.join(timeout=60)
        assert not sender.is_alive(), "the upload never finished"
        assert not failure, f"sending the upload failed: {failure[0]!r}"
        raw, _ = read_to_eof(sock)
    assert_rss_bounded(before, during, "64 MiB upload to a backend that waits")
    r = Response(raw)
    assert r.status == 200, f"no answer to the upload: {r!r}"
    report = r.json()
    assert report["received"] == n, f"the backend received {report['received']} of {n} bytes"
    assert report["sha256"] == expected_sha256, "the backend received other bytes than were sent"


# -- a backend that answers and closes at once ---------------------------------------

def answer_then_close(size):
    """A raw backend that reads the request head, sends a `size`-byte
    pattern body with no Content-Length (the end of the body is the end of
    the connection), and closes at once."""
    def handle(conn, backend):
        data = read_head(conn)
        if b"\r\n\r\n" not in data:
            return
        backend.record(data)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
        for chunk in pattern_chunks(size):
            conn.sendall(chunk)
        # returning closes the socket: FIN right behind the last byte
    return handle


@pytest.mark.stage(1)
@pytest.mark.parametrize("client", [
    pytest.param("fast", marks=pytest.mark.unreliable(
        2, 4, DROPS + "; a client reading at full speed is only sometimes slower than the backend")),
    pytest.param("pausing", marks=pytest.mark.bug(2, 4, DROPS)),
    pytest.param("half-closed-pausing", marks=pytest.mark.bug(2, 4, CLOSES_AT_EOF)),
])
def test_backend_answers_and_closes_at_once(make_raw_backend, start_proxy, client):
    """A backend that writes a 16 MiB response without Content-Length and
    closes straight away: every byte still reaches the client, whether it
    reads at full speed, pauses a second and a half (with a small receive
    buffer) before reading, or also half-closed its side after the request
    (then the backend socket reports a hang-up with data still to read)."""
    n = 16 * MiB  # more than the kernel buffers between proxy and client hold
    backend = make_raw_backend(answer_then_close(n))
    proxy = start_proxy(backend)
    pausing = client != "fast"
    with connect(proxy.port, rcvbuf=4096 if pausing else None) as sock:
        sock.sendall(build_request(proxy.port, "GET", "/answer-and-close"))
        if client == "half-closed-pausing":
            sock.shutdown(socket.SHUT_WR)
        if pausing:
            time.sleep(1.5)
        r = read_pattern_response(sock)
    r.assert_pattern(n)
    assert len(backend.received) == 1 and backend.received[0].startswith(b"GET /answer-and-close ")


# -- half-close -------------------------------------------------------------------

@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, CLOSES_AT_EOF)
def test_half_closed_client_gets_large_response(proxy):
    """A client that sends its request, shuts down its sending side
    (shutdown(SHUT_WR)) and pauses a second before reading still gets a
    16 MiB response completely: the client's EOF ends only the
    client-to-backend direction, and the response waits for the reader."""
    n = 16 * MiB
    with connect(proxy.port, rcvbuf=65536) as sock:
        sock.sendall(build_request(proxy.port, "GET", f"/bytes?n={n}"))
        sock.shutdown(socket.SHUT_WR)
        time.sleep(1.0)
        r = read_pattern_response(sock)
    r.assert_pattern(n)


# -- many peers, fairness ------------------------------------------------------------

@pytest.mark.stage(2)
def test_many_clients_disconnect_at_random_points(proxy):
    """30 clients download 8 MiB each and go away after a random number of
    bytes (a close, or a RST), and 10 clients upload 8 MiB each and go
    away after a random part of the body, all at the same time. The proxy
    survives, serves the next request, and holds no more fds than at
    startup (checked at teardown). The plan is drawn from a fixed seed."""
    n = 8 * MiB
    rng = random.Random(4004)
    plans = [("download", rng.randrange(0, n), rng.random() < 0.4, rng.random() * 0.3) for _ in range(30)]
    plans += [("upload", rng.randrange(0, n), rng.random() < 0.4, rng.random() * 0.3) for _ in range(10)]
    rng.shuffle(plans)

    def run(plan):
        kind, cut, rst, pause = plan
        sock = connect(proxy.port)
        try:
            if kind == "download":
                sock.sendall(build_request(proxy.port, "GET", f"/bytes?n={n}"))
                time.sleep(pause)
                got = 0
                while got < cut:
                    chunk = sock.recv(min(65536, cut - got))
                    if not chunk:
                        break
                    got += len(chunk)
            else:
                sock.sendall(upload_head(proxy.port, "/upload?patience=2", n))
                for chunk in pattern_chunks(cut):
                    sock.sendall(chunk)
                time.sleep(pause)
        except OSError:
            pass  # the proxy may give up on a pair first; that is its right
        finally:
            if rst:
                close_with_reset(sock)
            else:
                sock.close()

    with ThreadPoolExecutor(len(plans)) as pool:
        list(pool.map(run, plans))
    assert proxy.alive(), "the proxy died"
    assert_serves(proxy)


@pytest.mark.stage(2)
@pytest.mark.unreliable(2, 4, DROPS + "; the other clients' bodies are only exact by luck")
def test_paused_clients_do_not_starve_others(proxy):
    """While two clients hold 64 MiB responses paused (requests sent,
    nothing read), 20 other clients each get their 1 MiB answer, byte for
    byte; then the two paused clients read theirs completely too."""
    n_slow, n_other = 64 * MiB, MiB
    slow = [connect(proxy.port, rcvbuf=4096) for _ in range(2)]
    try:
        for sock in slow:
            sock.sendall(build_request(proxy.port, "GET", f"/bytes?n={n_slow}"))
        time.sleep(0.5)  # let both fill every buffer on their way
        lengths = [n_other + 101 * i for i in range(20)]
        with ThreadPoolExecutor(10) as pool:
            responses = list(pool.map(lambda n: get(proxy.port, f"/bytes?n={n}"), lengths))
        for n, r in zip(lengths, responses):
            assert r.status == 200, f"n={n}: {r!r}"
            assert_is_pattern(r.body, n, f"body of a {n}-byte answer")
        for i, sock in enumerate(slow):
            read_pattern_response(sock).assert_pattern(n_slow, f"paused client {i}")
    finally:
        for sock in slow:
            sock.close()
