"""max_body_size per site and pool (stage 22, issue 31): the request's
site, else its pool, else the top level, whose default is now 1 MiB (as
nginx's). A Content-Length over it gets 413 before any byte reaches a
backend; a chunked body growing past it gets 413 and the backend's request
(streamed) is aborted. The same over HTTP/2. The top level's own cases are
test_buffering.py's."""

import threading

import pytest

from backends import KeepAliveBackend, swallower
from client import Conn
from files_util import WWW, h2_client, start_tls_proxy
from netutil import wait_for
from pattern import pattern

pytestmark = pytest.mark.stage(22)

MiB = 1024 * 1024
GUARD = 10.0  # s: a bound on waiting (never a measurement)


@pytest.fixture
def app():
    backend = KeepAliveBackend("app")
    yield backend
    backend.stop()


def post(proxy, host, body, chunked=False):
    """POST /upload with body to host: the response."""
    with Conn(proxy.port, host=host) as c:
        if chunked:
            data = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 8192]), body[i:i + 8192])
                            for i in range(0, len(body), 8192)) + b"0\r\n\r\n"
            return c.request("POST", "/upload", [("Transfer-Encoding", "chunked")], data)
        return c.request("POST", "/upload", [("Content-Length", str(len(body)))], body)


def test_default_is_one_mib(start_proxy, app):
    """Without max_body_size: 1 MiB passes, 1 MiB + 1 gets 413 with
    nothing at the backend."""
    proxy = start_proxy(app)
    assert post(proxy, "x", pattern(MiB)).status == 200
    assert app.requests == 1
    r = post(proxy, "x", pattern(MiB + 1))
    assert r.status == 413, r
    assert app.requests == 1, "the refused body reached the backend"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_site_over_pool_over_top(start_proxy, app, chunked):
    """top 1000 bytes, pool p 3000, site big.example 5000 (over its pool
    p): each level's limit holds for its requests."""
    proxy = start_proxy(app, max_body_size=1000,
                        pools={"p": {"backends": [app], "max_body_size": 3000}},
                        sites={"big.example": {"pool": "p", "max_body_size": "5000"},
                               "pool.example": {"pool": "p"}, "top.example": [app]})
    cases = [("top.example", 1000, 1001), ("pool.example", 3000, 3001), ("big.example", 5000, 5001)]
    for host, fits, over in cases:
        assert post(proxy, host, pattern(fits), chunked).status == 200, host
        assert post(proxy, host, pattern(over), chunked).status == 413, host
    assert app.requests == 3, "a refused body reached the backend"


def test_streamed_chunked_body_aborted_at_the_site_limit(make_raw_backend, start_proxy):
    """request_buffering = false, the site's limit 10000: a chunked body of
    300,000 bytes is cut off with 413; the backend's connection is closed
    (its request aborted) having had at most the limit and the first read."""
    got, closed = [], threading.Event()
    raw = make_raw_backend(swallower(got, GUARD, closed))
    proxy = start_proxy(raw, request_buffering=False,
                        sites={"s.example": {"backends": [raw], "max_body_size": 10000}})
    r = post(proxy, "s.example", pattern(300000), chunked=True)
    assert r.status == 413, r
    wait_for(closed.is_set, "the backend's request aborted (its connection closed)", GUARD)
    assert sum(got) < 10000 + 64 * 1024 + 1000, f"the backend got {sum(got)} bytes"


def test_http2(start_proxy, app, tmp_path):
    """Over HTTP/2: a content-length over the site's limit and a body
    without one growing past it both get 413; one that fits passes."""
    proxy = start_tls_proxy(start_proxy, tmp_path, app,
                            sites={WWW: {"backends": [app], "max_body_size": 20000}})
    with h2_client(proxy) as c:
        fits = c.wait_ended(c.request("POST", "/upload", [("content-length", "20000")], pattern(20000)))
        announced = c.wait_ended(c.request("POST", "/upload", [("content-length", "20001")], pattern(20001)))
        grown = c.wait_ended(c.request("POST", "/upload", [], pattern(50000)))
    assert fits.status == 200, fits
    assert announced.status == 413, announced
    assert grown.status == 413, grown
    assert app.requests == 1, "a refused body reached the backend"


@pytest.mark.parametrize("line, message", [
    ('sites = { ["a.example"] = { backends = { "127.0.0.1:8001" }, max_body_size = "lots" } }',
     "setting 'sites[\"a.example\"].max_body_size' must be a whole number of bytes from 0 to"),
    ('pools = { p = { backends = { "127.0.0.1:8001" }, max_body_size = -1 } }',
     "setting 'pools.p.max_body_size' must be a whole number of bytes from 0 to"),
])
def test_bad_values_refused(rsp, tmp_path, line, message):
    from proxy import run_rsp
    path = tmp_path / "size.lua"
    path.write_text('listen = 18080\nbackends = { "127.0.0.1:8001" }\n' + line + "\n")
    result = run_rsp(rsp, ["-t", str(path)], tmp_path)
    assert result.returncode != 0 and message in result.stderr, result.stderr
