"""Upgrades (stage 09): a WebSocket handshake through rsp reaches the
backend with its Upgrade and Connection headers; once the backend answers
101 both sides are a byte tunnel (messages of any size, fragments, ping
and pong, the close handshake), bounded by idle_timeout; a refused upgrade
leaves the connection HTTP.

The backend is websocket.WebSocketBackend, an RFC 6455 echo server, and
the client websocket.WebSocketClient. Up to stage 08 rsp relayed bytes
until the backend closed and said Connection: close: the 101 never
arrived as such, or the tunnel ended at once.
"""

import random
import threading
import time

import pytest

from client import Conn
from netutil import wait_for
from pattern import assert_same_bytes, pattern
from websocket import BINARY, CLOSE, PONG, TEXT, WebSocketBackend, WebSocketClient, accept_key

FIRED_BY = 5.0         # s: a timeout must have fired by then
POLL_TIMEOUT = 10.0    # s: a bound on waiting for something that must happen
MiB = 1024 * 1024

pytestmark = pytest.mark.stage(9)


@pytest.fixture
def make_ws_backend():
    started = []

    def make(**options):
        backend = WebSocketBackend(**options)
        started.append(backend)
        return backend

    yield make
    for backend in started:
        backend.stop()


def open_ws(proxy, **options):
    ws = WebSocketClient(proxy.port, **options)
    r = ws.response
    assert ws.upgraded(), f"no upgrade: {r!r} {r.raw[:300]!r}"
    return ws


def test_upgrade_reaches_backend_and_answer_reaches_client(make_ws_backend, start_proxy):
    """The upgrade request reaches the backend as HTTP/1.1 with Upgrade:
    websocket, Connection: upgrade and the Sec-WebSocket headers; the
    client gets the 101 with Upgrade, Connection: upgrade and the right
    Sec-WebSocket-Accept."""
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455's example
    ws_backend = make_ws_backend()
    proxy = start_proxy(ws_backend)
    with open_ws(proxy, path="/chat?room=1") as ws:
        r = ws.response
        assert r.header("Upgrade").lower() == "websocket", r.headers
        assert "upgrade" in r.connection_tokens(), r.headers
        assert ws.close().opcode == CLOSE
    (line, headers), = ws_backend.heads
    assert line == "GET /chat?room=1 HTTP/1.1", line
    fields = {n.lower(): v for n, v in headers}
    assert fields.get("upgrade", "").lower() == "websocket", headers
    assert "upgrade" in [t.strip().lower() for t in fields.get("connection", "").split(",")], headers
    assert fields.get("sec-websocket-key") == ws.key and fields.get("sec-websocket-version") == "13", headers


def test_hundred_messages_echoed_exactly(make_ws_backend, start_proxy):
    """100 messages of mixed sizes up to 1 MiB (seeded: every length form,
    7, 16 and 64-bit, some text, some fragmented) come back exactly."""
    ws_backend = make_ws_backend()
    proxy = start_proxy(ws_backend)
    rng = random.Random(6455)
    edges = [0, 1, 125, 126, 127, 65535, 65536, 65537, MiB]
    sizes = edges + [rng.choice([rng.randrange(0, 126), rng.randrange(126, 65536), rng.randrange(65536, MiB + 1)])
                     for _ in range(100 - len(edges))]
    with open_ws(proxy) as ws:
        for i, size in enumerate(sizes):
            payload = pattern(size, offset=i)
            opcode = TEXT if i % 7 == 3 else BINARY
            if opcode == TEXT:
                payload = bytes(b % 64 + 32 for b in payload[:size])  # printable ASCII: valid UTF-8
            fragment = rng.choice([None, None, 1000, 70000]) if size > 1000 else None
            ws.send_message(payload, opcode, fragment=fragment)
            got_opcode, got = ws.recv_message()
            assert got_opcode == opcode, f"message {i}: opcode {got_opcode}, sent {opcode}"
            assert_same_bytes(got, payload, f"message {i} ({size} bytes)")
        assert ws.close().opcode == CLOSE
    assert ws_backend.messages == 100 and not ws_backend.errors, ws_backend.errors


def test_ping_pong_and_close_handshake(make_ws_backend, start_proxy):
    """A ping is answered by a pong with its payload; a close (1000) by a
    close with the same code, after which the connection ends with a FIN;
    rsp's fds are then back to startup."""
    ws_backend = make_ws_backend()
    proxy = start_proxy(ws_backend)
    with open_ws(proxy) as ws:
        pong = ws.ping(b"are you there?")
        assert pong.opcode == PONG and pong.payload == b"are you there?", pong
        ws.send_message(b"between pings")
        assert ws.recv_message() == (BINARY, b"between pings")
        assert ws.ping(b"").opcode == PONG
        reply = ws.close(1000)
        assert reply.opcode == CLOSE and reply.payload[:2] == (1000).to_bytes(2, "big"), reply
        assert ws.conn.closed(FIRED_BY), "the tunnel did not end after the close handshake"
    assert ws_backend.pings == 2 and ws_backend.closes == [1000]


def test_tunnel_carries_bytes_both_ways_at_once(make_ws_backend, start_proxy):
    """Ten 1 MiB messages sent without waiting for their echoes (the
    echoes come back while the client still sends) all come back, in
    order: the tunnel moves both directions at once."""
    ws_backend = make_ws_backend()
    proxy = start_proxy(ws_backend)
    with open_ws(proxy) as ws:
        received, failure = [], []

        def read():
            try:
                for _ in range(10):
                    received.append(ws.recv_message()[1])
            except Exception as e:  # reported below
                failure.append(e)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for i in range(10):
            ws.send_message(pattern(MiB, offset=i))
        reader.join(60)
        assert not failure and len(received) == 10, f"got {len(received)} echoes: {failure}"
        for i, got in enumerate(received):
            assert_same_bytes(got, pattern(MiB, offset=i), f"echo {i}")
        assert ws.close().opcode == CLOSE


@pytest.mark.parametrize("refuse", [403, 200])
def test_refused_upgrade_stays_http(make_ws_backend, start_proxy, refuse):
    """A backend that answers an upgrade request with 403 (or with an
    ordinary 200) does not switch: the client gets that answer, framed,
    and its connection carries another request."""
    ws_backend = make_ws_backend(refuse=refuse)
    proxy = start_proxy(ws_backend)
    ws = WebSocketClient(proxy.port, path="/ws")
    with ws:
        r = ws.response
        assert r.status == refuse and not ws.upgraded(), f"{r!r} {r.raw[:300]!r}"
        assert r.header("Upgrade") is None, f"an Upgrade header on a {refuse}: {r.headers}"
        assert r.complete and not r.eof, r
        after = ws.conn.request("GET", "/after")
        assert after.status == 200 and b'"path": "/after"' in after.body, f"{after!r} {after.raw[:300]!r}"
        assert after.json()["upgrade"] is None, "the second request carried an Upgrade header"
        assert ws.conn.is_open(0.2)
    assert [line for line, _ in ws_backend.heads] == ["GET /ws HTTP/1.1", "GET /after HTTP/1.1"]


def test_tunnel_ends_after_idle_timeout(make_ws_backend, start_proxy):
    """An upgraded connection on which nothing moves is closed after
    idle_timeout (0.5 s), not before 0.4 s; one that keeps talking is not."""
    ws_backend = make_ws_backend()
    proxy = start_proxy(ws_backend, idle_timeout=0.5)
    with open_ws(proxy) as talking:
        for _ in range(4):
            time.sleep(0.25)
            talking.send_message(b"still here")
            assert talking.recv_message() == (BINARY, b"still here")
    with open_ws(proxy) as idle:
        started = time.monotonic()
        state = idle.conn.state(FIRED_BY)
        elapsed = time.monotonic() - started
    assert state in ("eof", "reset"), f"an idle tunnel is {state!r} after {FIRED_BY} s"
    assert elapsed >= 0.4, f"the idle tunnel was closed after {elapsed:.2f} s, idle_timeout 0.5"


def test_others_served_while_tunnel_open(make_ws_backend, make_keepalive_backend, start_proxy):
    """While a WebSocket is open, other clients are served (by another
    site's backend), and the WebSocket still works after."""
    ws_backend = make_ws_backend()
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka, sites={"ws.test": [ws_backend]})
    with open_ws(proxy, host="ws.test") as ws:
        for i in range(5):
            with Conn(proxy.port) as other:
                got = other.request("GET", f"/cl?size={i + 10}")
                assert got.status == 200 and got.header("X-Backend") == "ka" and len(got.body) == i + 10, got
        ws.send_message(b"after the others")
        assert ws.recv_message() == (BINARY, b"after the others")
        assert ws.close().opcode == CLOSE
    wait_for(lambda: ws_backend.closes == [1000], "the close reaching the backend", POLL_TIMEOUT)
