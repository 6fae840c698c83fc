"""Health checks against backends that answer badly (stage 08). A health
check reads whatever a backend sends back (health.c, through
http_parse_status_line), so what it reads is hostile input: binary junk,
a line that never ends, a status line cut short, a status out of range.
Each such answer fails the check (the backend is marked down, once),
rsp keeps running and serving the healthy backend, and a well-formed
answer, however terse, passes."""

import pytest

from backends import read_head
from checks import assert_logged_once, backend_name, served_by, wait_for_log
from client import get
import netutil

POLL_TIMEOUT = 10.0  # a bound on waiting for something that must happen


def answering(reply):
    """A RawBackend handler that reads a request head, sends `reply` and
    closes."""
    def handle(conn, backend):
        backend.record(read_head(conn))
        conn.sendall(reply)
    return handle


BAD_ANSWERS = [
    ("ssh-banner", b"SSH-2.0-OpenSSH_9.2\r\n"),
    ("binary", bytes(range(256)) * 4),
    ("endless-line", b"HTTP/1.1 200 " + b"x" * 5000),
    ("cut-short", b"HTTP/1.1 20"),
    ("no-line-end", b"HTTP/1.1 200 OK"),
    ("http2", b"HTTP/2 200\r\n\r\n"),
    ("status-099", b"HTTP/1.1 099 Early\r\n\r\n"),
    ("status-600", b"HTTP/1.1 600 Odd\r\n\r\n"),
    ("nul-in-reason", b"HTTP/1.1 200 O\x00K\r\n\r\n"),
    ("cr-inside", b"HTTP/1.1 200 O\rK\r\n\r\n"),
    ("lower-case", b"http/1.1 200 OK\r\n\r\n"),
    ("server-error", b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"),
    ("nothing", b""),
]


@pytest.mark.stage(8)
@pytest.mark.parametrize("reply", [r for _, r in BAD_ANSWERS], ids=[name for name, _ in BAD_ANSWERS])
def test_bad_answer_fails_the_check(make_backend, make_raw_backend, start_proxy, reply):
    """A backend answering its checks with `reply` is marked down once and
    gets no client request; the other backend serves every request."""
    good = make_backend("good")
    bad = make_raw_backend(answering(reply))
    proxy = start_proxy(good, bad, health_check={"path": "/healthz", "interval": 0.1, "timeout": 0.5,
                                                 "rise": 2, "fall": 2})
    down = f"backend {backend_name(bad.host, bad.port)} is down: health check"
    wait_for_log(proxy, down, POLL_TIMEOUT)
    assert [served_by(get(proxy.port, f"/echo?i={i}")) for i in range(6)] == ["good"] * 6
    assert all(head.startswith(b"GET /healthz HTTP/1.1\r\n") for head in bad.received), bad.received[:3]
    assert_logged_once(proxy, down)


GOOD_ANSWERS = [
    ("bare-lf", b"HTTP/1.1 204\n"),
    ("no-reason", b"HTTP/1.0 200\r\n\r\n"),
    ("obs-text-reason", b"HTTP/1.1 200 \xc3\xa7a va\r\nX: y\r\n\r\n"),
    ("not-found", b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
]


@pytest.mark.stage(8)
@pytest.mark.parametrize("reply", [r for _, r in GOOD_ANSWERS], ids=[name for name, _ in GOOD_ANSWERS])
def test_terse_good_answer_passes(make_raw_backend, start_proxy, reply):
    """A well-formed status line below 500 passes, however little else
    comes with it: the backend stays up (nothing is logged about it)
    after many checks."""
    terse = make_raw_backend(answering(reply))
    proxy = start_proxy(terse, health_check={"path": "/healthz", "interval": 0.05, "timeout": 0.5,
                                             "rise": 1, "fall": 1})
    netutil.wait_for(lambda: len(terse.received) >= 10, "ten health checks", POLL_TIMEOUT)
    assert "is down" not in proxy.stderr(), proxy.stderr()
