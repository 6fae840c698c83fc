"""Ends of connections, on either side, at awkward moments: the proxy
answers what it can, survives, and closes what it opened."""

import socket

import pytest

from backends import close_at_once, reply_after_eof
from checks import assert_serves
from client import build_request, close_with_reset, connect, get, read_some_then_close, read_to_eof, Response
from netutil import free_port
from pattern import assert_is_pattern, assert_is_pattern_prefix

MiB = 1024 * 1024


def assert_no_answer_or_502(r):
    """Without a working backend, the early stages close the client
    connection without a word; later ones answer 502."""
    assert r.raw == b"" or r.status == 502, f"expected no answer or a 502, got {r.raw[:200]!r}"


@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, "the pair is closed as soon as either side reaches EOF")
def test_client_half_close_still_gets_response(proxy):
    """A client that shuts down its sending side after the request
    (shutdown(SHUT_WR)) still receives the whole response. (The backend
    waits half a second before answering, so that the half-close surely
    reaches the proxy before the response does.)"""
    r = get(proxy.port, "/bytes?n=100000&delay=0.5", half_close=True)
    assert r.status == 200
    assert_is_pattern(r.body, 100000)


@pytest.mark.stage(1, 5)  # from stage 06 rsp speaks HTTP: a request ends where its framing says
@pytest.mark.bug(2, 4, "the pair is closed as soon as either side reaches EOF")
def test_client_half_close_reaches_backend(make_raw_backend, start_proxy):
    """The client's half-close is passed on to the backend, which sees the
    end of the request and can still answer through the proxy."""
    backend = make_raw_backend(reply_after_eof)
    proxy = start_proxy(backend)
    with connect(proxy.port) as sock:
        sock.sendall(b"hello, backend")
        sock.shutdown(socket.SHUT_WR)
        raw, _ = read_to_eof(sock)
    r = Response(raw)
    assert r.status == 200
    assert r.body == b"received 14 bytes before EOF\n"
    assert backend.received == [b"hello, backend"]


@pytest.mark.stage(1)
@pytest.mark.parametrize("rst", [False, True], ids=["close", "reset"])
def test_client_disconnects_mid_response(proxy, rst):
    """A client that goes away after 1 MiB of a 20 MiB response (a plain
    close, or a RST) does not take the proxy down; the next client is
    served, and no fd stays open (checked at teardown)."""
    got = read_some_then_close(proxy.port, f"/bytes?n={20 * MiB}", MiB, rst=rst)
    assert got == MiB
    assert_serves(proxy)


@pytest.mark.stage(1)
def test_backend_down_then_up(make_backend, start_proxy):
    """With nothing listening at the backend's address the client gets no
    answer (or a 502) and the proxy keeps running; once a backend listens
    there, requests succeed, without restarting the proxy."""
    port = free_port()
    proxy = start_proxy(("127.0.0.1", port))
    assert_no_answer_or_502(get(proxy.port, "/echo"))
    assert_no_answer_or_502(get(proxy.port, "/echo"))
    make_backend("late", port=port)  # now something listens there
    r = get(proxy.port, "/echo")
    assert r.status == 200
    assert r.json()["backend"] == "late"


@pytest.mark.stage(1)
def test_backend_accepts_and_closes(make_raw_backend, start_proxy):
    """A backend that accepts and closes at once gives the client no
    answer (or a 502), and the proxy survives."""
    proxy = start_proxy(make_raw_backend(close_at_once))
    assert_no_answer_or_502(get(proxy.port, "/echo"))
    assert proxy.alive()


@pytest.mark.stage(1)
@pytest.mark.parametrize("rst", [0, 1], ids=["close", "reset"])
def test_backend_closes_mid_response(proxy, rst):
    """A backend that announces 2 MB, sends half and closes (plainly or
    with a RST): the client's connection ends instead of hanging, what
    arrived is uncorrupted, and the proxy serves the next request."""
    n = 2_000_000
    r = get(proxy.port, f"/close-mid?n={n}&rst={rst}")
    assert len(r.body) <= n // 2
    assert_is_pattern_prefix(r.body)
    assert_serves(proxy)


@pytest.mark.stage(2)
def test_connection_churn(proxy):
    """Bursts of 100 connections open at once, closed in different ways
    (at once, after half a request, with a RST), leave the proxy running,
    serving, and with no more fds than at startup (checked at teardown)."""
    half_request = build_request(proxy.port, "GET", "/bytes?n=100")[:20]
    for burst in range(5):
        socks = [connect(proxy.port) for _ in range(100)]
        for i, sock in enumerate(socks):
            if i % 3 >= 1:
                sock.sendall(half_request)
            if i % 3 == 2:
                close_with_reset(sock)
            else:
                sock.close()
    assert_serves(proxy)
