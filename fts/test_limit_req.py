"""limit_req and limit_conn (stage 22, issue 31): a token bucket per client
address (IPv4: the address; IPv6: its /64) and level, `burst` tokens at
once, refilled at `rate` a second, shared by every worker; a request with
no token left gets `429 Too Many Requests` with Retry-After and never
reaches a backend. limit_conn: the connection over the limit gets 429 for
its first request and is closed; the others keep working.

Counts are exact: with rate = 1 per 3600 s no token comes back during a
test, so a fresh address gets exactly `burst` requests through. The fast
rate (1000/s) is checked by counting against a measured monotonic
interval: at least `burst`, at most `burst + 1000 x elapsed + 1`, with no
assertion on how long anything took. Other client addresses are 127.x.y.z
(any of them reaches loopback on Linux). The table's eviction with 50,000
keys is fuzz/test_limit.c's; here a few hundred addresses pass and a hot
one stays limited."""
import os
import signal
import time

import pytest

from checks import log_lines, wait_for_log
from client import Conn, build_request, exchange
from netutil import free_port
from promparse import value as metric_value
from proxy import proxy_arguments, run_rsp
from test_status import metrics, start_with_status, status_json, wait_status
from test_workers import POLL_TIMEOUT, conns_on_every_worker, started_workers

try:  # the HTTP/2 test needs python3-h2 and python3-trustme, as test_http2.py does
    from test_http2 import NO_ERROR, ca, cert, ctx, h2, raw, start_h2  # noqa: F401 (fixtures)
    HAVE_H2 = True
except pytest.skip.Exception:
    HAVE_H2 = False

pytestmark = pytest.mark.stage(22)

HOUR = 1 / 3600  # a rate at which no token comes back during a test


def ask(proxy, source="127.0.0.1", path="/echo"):
    """One request (Connection: close) from `source`; the Response."""
    return exchange(proxy.port, build_request(proxy.port, path=path), source=source)


def statuses(proxy, n, source="127.0.0.1"):
    return [ask(proxy, source).status for _ in range(n)]


def test_burst_then_429_with_retry_after(backend, start_proxy):
    proxy = start_with_status(start_proxy, backend, limit_req={"rate": HOUR, "burst": 3})
    assert statuses(proxy, 5) == [200, 200, 200, 429, 429]
    assert backend.requests == 3, f"the backend got {backend.requests} requests, not the burst of 3"
    r = ask(proxy)
    assert r.status == 429
    assert b"Too Many Requests" in r.body, r.body
    # No token for an hour: the next one comes in just under 3600 s.
    retry = int(r.header("Retry-After"))
    assert 3500 <= retry <= 3600, f"Retry-After: {retry}"
    assert backend.requests == 3
    lines = log_lines(proxy, "limit_req: 127.0.0.1 over")
    assert lines, proxy.stderr()
    assert "(burst 3): 429 (1 refused since the last line)" in lines[0], lines
    doc = status_json(proxy)
    assert doc["limits"]["refused"]["limit_req"] == 3, doc["limits"]
    assert doc["limits"]["addresses"] == 1, doc["limits"]
    site = [s for s in doc["sites"] if s["name"] == "default"][0]
    assert site["refused"]["limit_req"] == 3, site
    m = metrics(proxy)
    assert metric_value(m, "rsp_refused_total", site="default", reason="limit_req") == 3
    assert metric_value(m, "rsp_limit_addresses") == 1


def test_second_address_unaffected(backend, start_proxy):
    proxy = start_proxy(backend, limit_req={"rate": HOUR, "burst": 2})
    assert statuses(proxy, 3, "127.0.0.1") == [200, 200, 429]
    assert statuses(proxy, 3, "127.0.0.2") == [200, 200, 429]
    assert statuses(proxy, 1, "127.0.0.1") == [429]
    assert backend.requests == 4


def test_fast_rate_refills(backend, start_proxy):
    rate, burst, n = 1000, 5, 200
    proxy = start_proxy(backend, limit_req={"rate": rate, "burst": burst})
    with Conn(proxy.port) as c:
        begin = time.monotonic()
        got = [c.get("/echo").status for _ in range(n)]
        elapsed = time.monotonic() - begin
    allowed = got.count(200)
    assert set(got) <= {200, 429}, got
    assert burst <= allowed <= burst + rate * elapsed + 1, \
        f"{allowed} of {n} requests allowed in {elapsed:.3f} s at {rate}/s, burst {burst}"
    assert backend.requests == allowed


def test_budget_shared_by_workers(backend, start_proxy):
    proxy = start_proxy(backend, workers=2, limit_req={"rate": HOUR, "burst": 4})
    pids = started_workers(proxy, 2)
    conns = conns_on_every_worker(proxy.port, pids)  # one request on each: 2 tokens
    try:
        assert [r.status for _, r in conns.values()] == [200, 200]
        got = []
        for _ in range(2):
            for c, _ in conns.values():
                got.append(c.get("/echo").status)
        assert got == [200, 200, 429, 429], f"two workers, one budget of 4: {got}"
    finally:
        for c, _ in conns.values():
            c.close()
    assert backend.requests == 4


def test_many_addresses_then_hot_one_still_limited(backend, start_proxy):
    proxy = start_with_status(start_proxy, backend, limit_req={"rate": HOUR, "burst": 2})
    assert statuses(proxy, 2) == [200, 200]
    others = [f"127.1.{i // 200}.{i % 200 + 1}" for i in range(300)]
    for source in others:
        assert ask(proxy, source).status == 200, source
    assert statuses(proxy, 1) == [429]
    doc = status_json(proxy)
    assert doc["limits"]["addresses"] == 301, doc["limits"]
    assert backend.requests == 302


def test_limit_conn(backend, start_proxy):
    proxy = start_with_status(start_proxy, backend, limit_conn=2, keepalive_timeout=60)
    first, second = Conn(proxy.port), Conn(proxy.port)
    try:
        assert first.get("/echo").status == 200
        assert second.get("/echo").status == 200
        with Conn(proxy.port) as third:
            r = third.get("/echo")
            assert r.status == 429, r
            assert r.header("Connection") == "close", r.headers
            assert third.closed(), "the connection over limit_conn stays open"
        assert first.get("/echo").status == 200
        assert second.get("/echo").status == 200
        second.close()
        wait_status(proxy, lambda d: d["connections"] == 1, "one connection left open")
        with Conn(proxy.port) as fourth:
            assert fourth.get("/echo").status == 200
    finally:
        first.close()
        second.close()
    assert backend.requests == 5
    doc = status_json(proxy)
    assert doc["limits"]["refused"]["limit_conn"] == 1, doc["limits"]


def ask_host(proxy, host, source="127.0.0.1"):
    return exchange(proxy.port, build_request(proxy.port, path="/echo", host=host), source=source).status


def test_site_pool_and_top_level_budgets(make_backend, start_proxy):
    """The request's site's limit_req, else its pool's, else the top
    level's: one budget per level, a site without its own sharing its
    pool's (or the top level's)."""
    a, b, c, d = (make_backend(n) for n in "abcd")
    proxy = start_proxy(a, limit_req={"rate": HOUR, "burst": 1},
                        pools={"shared": {"backends": [b], "limit_req": {"rate": HOUR, "burst": 2}}},
                        sites={"own.test": {"backends": [c], "limit_req": {"rate": HOUR, "burst": 3}},
                               "pooled.test": {"pool": "shared"},
                               "plain.test": {"backends": [d]}})
    assert [ask_host(proxy, "own.test") for _ in range(4)] == [200, 200, 200, 429]
    assert [ask_host(proxy, "pooled.test") for _ in range(3)] == [200, 200, 429]
    # No limit_req of its own and a pool of its own: the top level's budget.
    assert [ask_host(proxy, "plain.test") for _ in range(2)] == [200, 429]
    assert [ask_host(proxy, "other.test") for _ in range(1)] == [429], "the default site: the top level's budget"
    assert (c.requests, b.requests, d.requests, a.requests) == (3, 2, 1, 0)


def test_429_takes_the_error_page(backend, start_proxy, tmp_path):
    page = tmp_path / "busy.html"
    page.write_bytes(b"<p>slow down</p>\n")
    proxy = start_proxy(backend, limit_req={"rate": HOUR, "burst": 1}, error_pages={429: str(page)})
    assert ask(proxy).status == 200
    r = ask(proxy)
    assert (r.status, r.body) == (429, b"<p>slow down</p>\n"), r
    assert 3500 <= int(r.header("Retry-After")) <= 3600, r.headers


@pytest.mark.parametrize("limit_req, words", [
    ({"rate": 0}, "setting 'limit_req.rate' must be a number of requests a second above 0, at most 1000000"),
    ({"rate": 2e6}, "setting 'limit_req.rate' must be a number of requests a second above 0, at most 1000000"),
    ({"rate": 1, "burst": 1.5}, "setting 'limit_req.burst' must be a whole number from 1 to 1000000"),
    ({"rate": 1, "brust": 2}, "limit_req"),
    (10, "setting 'limit_req' must be a table like { rate = 10, burst = 20 }, not a number"),
])
def test_bad_limit_req(rsp, tmp_path, limit_req, words):
    args = proxy_arguments(rsp.stage, free_port(), [("127.0.0.1", 9)], str(tmp_path), {"limit_req": limit_req})
    result = run_rsp(rsp, ["-t", args[-1]], str(tmp_path))
    assert result.returncode != 0, result
    assert words in result.stderr, result.stderr


@pytest.mark.skipif(not HAVE_H2, reason="python3-h2 or python3-trustme is not installed")
def test_limit_conn_http2(backend, start_proxy, cert, ctx):
    """HTTP/2: the connection over limit_conn gets 429 on its first stream
    and a GOAWAY; the one within it goes on."""
    proxy = start_h2(start_proxy, backend, cert=cert, limit_conn=1)
    with h2(proxy, ctx) as first:
        assert first.get("/echo").status == 200
        # A raw client: python3-h2 takes any GOAWAY for the connection's end
        # and then refuses the 429's DATA that follows it.
        with raw(proxy, ctx) as second:
            second.send(second.request_frames(1, "GET", "/echo"))
            s = second.collect([1])[1]
            assert s.status == 429, second.describe()
            goaways, how = second.until_closed()
            assert goaways and all(code == NO_ERROR for code, _ in goaways), second.describe()
        assert first.get("/echo").status == 200
    assert backend.requests == 2


def test_dead_workers_connections_uncounted(backend, start_proxy):
    """A worker killed with connections open: the master zeroes its
    column of limit_conn's counts (the kernel closed them), so they do not
    hold the address's budget for ever."""
    proxy = start_proxy(backend, workers=2, limit_conn=2, keepalive_timeout=60)
    first, second = started_workers(proxy, 2)
    conns = conns_on_every_worker(proxy.port, [first, second])
    try:
        assert [r.status for _, r in conns.values()] == [200, 200]
        with Conn(proxy.port) as over:
            assert over.get("/echo").status == 429, "a third connection within limit_conn = 2"
        os.kill(first, signal.SIGKILL)
        # The master logs this after it cleared the dead worker's counts.
        wait_for_log(proxy, f"worker 1 (pid {first}) was killed by signal 9; starting another", POLL_TIMEOUT)
        with Conn(proxy.port, timeout=POLL_TIMEOUT) as again:
            assert again.get("/echo").status == 200, "the dead worker's connection still counts"
        assert conns[second][0].get("/echo").status == 200
    finally:
        for c, _ in conns.values():
            c.close()
