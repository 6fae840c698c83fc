"""Limits and access together (stage 22, issue 31; the binding text is
/work/notes/spec31.md): how limit_req, limit_conn, allow/deny,
basic_auth, max_body_size, the PROXY protocol and trusted_proxies meet.

- the order of checks: allow/deny (403), then limit_req (429), then
  basic_auth (401), then max_body_size (413): a denied client gets 403
  even over its rate; a client over its rate gets 429, not 401; a failed
  basic-auth attempt takes a token like any request (a burst of N: N
  wrong passwords, then the right one gets 429);
- every refusal reaches no backend (backends that record every request
  and connection);
- status.json's "limits" and per-site "refused", and /metrics'
  rsp_refused_total{site,reason}, rsp_limit_addresses and
  rsp_limit_evictions_total, move by exactly the refusals made;
- error_pages and headers (stage 21) apply to rsp's 429/403/401/413, which
  keep Retry-After and WWW-Authenticate;
- HTTP/2 streams are refused the same way;
- the level whose limit_req applies: the site's, else its pool's, else
  the top level's; one budget per address per level (two sites without a
  limit of their own share the top level's);
- keys: each IPv4 address its own; IPv6 by /64 (::1, and PROXY TCP6
  addresses in one /64 or two);
- a reload changing limit_req: the new burst applies (whether an
  address's budget under an unchanged level survives a reload the spec
  does not say: only the new limit is asserted);
- limit_conn counted across two workers;
- the PROXY protocol's address (v1 and v2) and trusted_proxies'
  X-Forwarded-For client feed allow/deny and limit_req, not the TCP peer;
- 50,000 distinct client identities through PROXY headers: the table
  stays within LIMIT_SLOTS entries, evicts, rsp's memory stays put, and a
  hot address stays limited.

Decided where the spec leaves room (each test says so too):
- a failed basic-auth attempt costs one token in all (the token every
  request takes), not two: N wrong passwords all get 401 with a burst of N;
- a site naming a pool with no limit_req of its own takes the pool's;
- a refused request is "seen" for the table's LRU (a hot address refused
  all along is not evicted).

Rate SLOW (one token per 1000 s) everywhere: nothing refills while a test
runs, so the counts are exact and no test measures time.
"""


import time

import pytest

from checks import log_lines
from client import Conn
from files_util import PageBackend, h2_client, start_tls_proxy, write_tree
from limits_util import (LIMIT_SLOTS, REASONS, SLOW, SourceConn, basic, fetch_from, nth_ipv4, proxy_v1,
                         proxy_v1_unknown, proxy_v2, refused, rewrite_limited, site_refused, source_socket,
                         start_limited, statuses, wait_refused, write_htpasswd, zero_refused)
from netutil import free_port, ipv6_loopback_available
from promparse import samples, value
from proxy import is_sanitized, vm_rss
from test_operations import sighup
from test_status import metrics, status_json, wait_status

pytestmark = pytest.mark.stage(22)

KiB = 1024
MiB = 1024 * KiB
USER, PASSWORD = "alice", "correct horse battery staple"
PAGE_429 = b"<!DOCTYPE html>\n<title>slow down</title><h1>Too many requests from you</h1>\n"
PAGE_403 = b"<!DOCTYPE html>\n<title>no</title><h1>Not from your address</h1>\n"
PAGE_401 = b"<!DOCTYPE html>\n<title>who?</title><h1>Sign in first</h1>\n"
PAGE_413 = b"<!DOCTYPE html>\n<title>too big</title><h1>That upload is too large</h1>\n"


# -- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture
def app():
    """A backend recording every connection and request (KeepAliveBackend)."""
    backend = PageBackend("app")
    yield backend
    backend.stop()


@pytest.fixture
def other():
    backend = PageBackend("other")
    yield backend
    backend.stop()


@pytest.fixture
def users(tmp_path):
    """An htpasswd file with USER:PASSWORD (sha512crypt)."""
    return write_htpasswd(tmp_path / "htpasswd", {USER: PASSWORD})


@pytest.fixture
def start(start_proxy, rsp, tmp_path):
    """start(*backends, limits={...}, **options): start_limited."""
    return lambda *backends, **options: start_limited(start_proxy, rsp, tmp_path, *backends, **options)


def limit(burst, rate=SLOW):
    return {"rate": rate, "burst": burst}


def auth_table(users, realm="private"):
    return {"realm": realm, "users": users}


_test_started = [0.0]


@pytest.fixture(autouse=True)
def _note_start():
    """Every test starts a fresh rsp, so every bucket it empties was
    emptied after this moment (assert_429's bound)."""
    _test_started[0] = time.monotonic()


def assert_429(r, what=""):
    """r is rsp's 429 with a Retry-After of the time to one token at rate
    SLOW: 1000 s rounded up, less the time the bucket has had to refill,
    which is at most the time since the test began (a slow machine makes
    that longer; the bound follows it rather than guessing)."""
    assert r.status == 429, f"{what}: expected 429, got {r!r} {r.headers}"
    retry = r.header("Retry-After")
    assert retry is not None and retry.isdigit(), f"{what}: 429 without a Retry-After in seconds: {r.headers}"
    refilled = time.monotonic() - _test_started[0]
    assert 1000 - refilled - 1 <= int(retry) <= 1000, \
        f"{what}: Retry-After {retry} at rate {SLOW}/s (one token: 1000 s) {refilled:.1f} s into the test"


def assert_401(r, realm="private", what=""):
    assert r.status == 401, f"{what}: expected 401, got {r!r} {r.headers}"
    assert r.header_values("WWW-Authenticate") == [f'Basic realm="{realm}", charset="UTF-8"'], \
        f"{what}: {r.headers}"


def echoed(r, name):
    """The value of header `name` the backend saw (its /echo lists
    [name, value] pairs), or None."""
    values = [v for n, v in r.json()["headers"] if n.lower() == name]
    assert len(values) <= 1, f"{name} reached the backend {len(values)} times: {values}"
    return values[0] if values else None


def assert_nothing_reached(backend, what):
    assert backend.connections == 0 and backend.requests == 0, \
        f"{what}: {backend.requests} requests on {backend.connections} connections reached the backend"


def metric_refused(families):
    """{(site, reason): value} of rsp_refused_total's non-zero samples."""
    if "rsp_refused_total" not in families:
        return {}
    return {(l["site"], l["reason"]): v for l, v in samples(families, "rsp_refused_total") if v}


def status_refused_by_site(doc):
    """{(site, reason): n} of every site's non-zero refused counts."""
    return {(s["name"], reason): n for s in doc["sites"] for reason, n in s.get("refused", {}).items() if n}


# -- the order of checks -------------------------------------------------------------------


def test_denied_client_gets_403_even_over_its_rate(start, app):
    """deny comes before limit_req: 127.0.0.2 (denied) gets 403 five times
    with a burst of 2, never 429, and no token of its is counted as
    limit_req; 127.0.0.3 beside it gets its 2, then 429."""
    proxy = start(app, limits={"limit_req": limit(2), "deny": ["127.0.0.2"]})
    for i in range(5):
        r = fetch_from(proxy, "127.0.0.2")
        assert r.status == 403, f"denied request {i + 1} (burst 2): {r!r} {r.headers}"
        assert r.header("Retry-After") is None, r.headers
    assert_nothing_reached(app, "denied requests")
    assert statuses(proxy, 2, source="127.0.0.3") == [200, 200]
    assert_429(fetch_from(proxy, "127.0.0.3"), "127.0.0.3's third request")
    assert app.requests == 2
    wait_refused(proxy, deny=5, limit_req=1)


def test_allow_list_refuses_the_rest_before_the_rate(start, app):
    """allow = {127.0.0.2}: 127.0.0.3 (no allow rule matches) gets 403
    even after its burst of 1 would be spent; 127.0.0.2 gets 1, then 429."""
    proxy = start(app, limits={"limit_req": limit(1), "allow": ["127.0.0.2/32"]})
    assert statuses(proxy, 3, source="127.0.0.3") == [403, 403, 403]
    assert fetch_from(proxy, "127.0.0.2").status == 200
    assert_429(fetch_from(proxy, "127.0.0.2"))
    assert app.requests == 1
    wait_refused(proxy, deny=3, limit_req=1)


def test_over_its_rate_429_comes_before_401(start, app, users):
    """limit_req before basic_auth: after a burst of 2 answered (right
    password), the right password, none and a wrong one all get 429 with
    no WWW-Authenticate: the password is never looked at."""
    proxy = start(app, limits={"limit_req": limit(2), "basic_auth": auth_table(users)})
    good = [basic(USER, PASSWORD)]
    for i in range(2):
        r = fetch_from(proxy, "127.0.0.2", headers=good)
        assert r.status == 200, f"request {i + 1} with the right password: {r!r}"
    for what, headers in (("the right password", good), ("no credentials", []),
                          ("a wrong password", [basic(USER, "wrong")])):
        r = fetch_from(proxy, "127.0.0.2", headers=headers)
        assert_429(r, what)
        assert r.header("WWW-Authenticate") is None, f"{what}: a 429 asking for credentials: {r.headers}"
    assert app.requests == 2
    wait_refused(proxy, limit_req=3)


@pytest.mark.parametrize("failure", ["wrong", "missing", "malformed"])
def test_failed_auth_attempts_take_tokens(start, app, users, failure):
    """A failed basic-auth attempt takes a limit_req token: with a burst
    of 3, three failed attempts (wrong password, no Authorization,
    a malformed one) each get 401, and then the right password gets 429
    (decided: one token per attempt in all, the one every request takes).
    Another address still gets in with the right password."""
    proxy = start(app, limits={"limit_req": limit(3), "basic_auth": auth_table(users)})
    bad = {"wrong": [basic(USER, "guess")], "missing": [],
           "malformed": [("Authorization", "Basic !!!not-base64!!!")]}[failure]
    for i in range(3):
        assert_401(fetch_from(proxy, "127.0.0.2", headers=bad), what=f"{failure} attempt {i + 1} of 3")
    assert_429(fetch_from(proxy, "127.0.0.2", headers=[basic(USER, PASSWORD)]),
               "the right password after three failed attempts (burst 3)")
    assert_nothing_reached(app, "failed and limited attempts")
    r = fetch_from(proxy, "127.0.0.3", headers=[basic(USER, PASSWORD)])
    assert r.status == 200, f"another address with the right password: {r!r}"
    assert echoed(r, "authorization") is None, "the Authorization header reached the backend"
    wait_refused(proxy, auth=3, limit_req=1)


def test_body_size_is_checked_last(start, app, users):
    """max_body_size ("1k") after the other three: an oversized POST gets
    403 from a denied address, 401 without credentials, 413 with them,
    and 429 once the burst (3) is spent; nothing reaches the backend."""
    proxy = start(app, limits={"limit_req": limit(3), "basic_auth": auth_table(users), "deny": ["127.0.0.9"],
                               "max_body_size": "1k"})
    body = b"x" * 4000
    assert fetch_from(proxy, "127.0.0.9", "/echo", "POST", body=body).status == 403
    assert_401(fetch_from(proxy, "127.0.0.2", "/echo", "POST", body=body), what="oversized, no credentials")
    for i in range(2):
        r = fetch_from(proxy, "127.0.0.2", "/echo", "POST", [basic(USER, PASSWORD)], body)
        assert r.status == 413, f"oversized with credentials ({i + 1}): {r!r} {r.headers}"
    assert_429(fetch_from(proxy, "127.0.0.2", "/echo", "POST", [basic(USER, PASSWORD)], body),
               "the fourth request (burst 3)")
    assert_nothing_reached(app, "oversized bodies")
    wait_refused(proxy, deny=1, auth=1, body_size=2, limit_req=1)


# -- counters --------------------------------------------------------------------------------


def test_status_and_metrics_count_each_refusal(start, app, other, users):
    """Known refusals on two sites: limited.test (burst 1) and guarded.test
    (deny 127.0.0.9, basic_auth, max_body_size 1k); status.json's
    limits.refused, sites[].refused and /metrics' rsp_refused_total{site,
    reason} count exactly those, all zero before; a second round of the
    same refusals (from other addresses, with their own budgets) doubles
    every count; rsp_limit_addresses and rsp_limit_evictions_total say what
    status.json's addresses and evictions say."""
    proxy = start(sites={"limited.test": {"backends": [app], "limit_req": limit(1)},
                         "guarded.test": {"backends": [other], "deny": ["127.0.0.9", "127.0.1.9"],
                                          "basic_auth": auth_table(users), "max_body_size": "1k"}})
    doc = status_json(proxy)
    assert refused(doc) == zero_refused(), doc["limits"]
    assert (doc["limits"]["addresses"], doc["limits"]["evictions"]) == (0, 0), doc["limits"]
    for site in ("limited.test", "guarded.test"):
        assert set(site_refused(doc, site)) == set(REASONS) and not any(site_refused(doc, site).values()), \
            site_refused(doc, site)
    assert metric_refused(metrics(proxy)) == {}

    def round_of_refusals(net):
        for _ in range(3):  # 1 answered, 2 limited
            fetch_from(proxy, f"127.0.{net}.2", host="limited.test")
        for _ in range(2):
            assert fetch_from(proxy, f"127.0.{net}.9", host="guarded.test").status == 403
        assert fetch_from(proxy, f"127.0.{net}.3", host="guarded.test").status == 401
        r = fetch_from(proxy, f"127.0.{net}.3", "/echo", "POST", [basic(USER, PASSWORD)], b"y" * 2000,
                       host="guarded.test")
        assert r.status == 413, r

    round_of_refusals(0)
    doc = wait_refused(proxy, limit_req=2, deny=2, auth=1, body_size=1)
    assert status_refused_by_site(doc) == {("limited.test", "limit_req"): 2, ("guarded.test", "deny"): 2,
                                           ("guarded.test", "auth"): 1, ("guarded.test", "body_size"): 1}, doc["sites"]
    families = metrics(proxy)
    assert metric_refused(families) == status_refused_by_site(doc)
    assert value(families, "rsp_limit_addresses") == doc["limits"]["addresses"] >= 1, doc["limits"]
    assert value(families, "rsp_limit_evictions_total") == doc["limits"]["evictions"] == 0, doc["limits"]
    assert app.requests == 1 and other.requests == 0

    round_of_refusals(1)
    doc = wait_refused(proxy, limit_req=4, deny=4, auth=2, body_size=2)
    assert status_refused_by_site(doc) == {("limited.test", "limit_req"): 4, ("guarded.test", "deny"): 4,
                                           ("guarded.test", "auth"): 2, ("guarded.test", "body_size"): 2}, doc["sites"]
    assert metric_refused(metrics(proxy)) == status_refused_by_site(doc)
    assert app.requests == 2 and other.requests == 0


def test_limit_req_logged_at_most_once_a_second(start, app):
    """Ten refusals of one address in a row: at most one `limit_req:
    127.0.0.2 over 0.001/s (burst 1): 429` line per second of the test's
    run, at least one (the spec's line, naming the address)."""
    proxy = start(app, limits={"limit_req": limit(1)})
    fetch_from(proxy, "127.0.0.2")
    for _ in range(10):
        assert fetch_from(proxy, "127.0.0.2").status == 429
    wait_refused(proxy, limit_req=10)
    lines = log_lines(proxy, "limit_req: 127.0.0.2 over")
    assert lines, f"no limit_req line for 127.0.0.2\n{proxy.stderr()}"
    assert all("(burst 1): 429" in line for line in lines), f"not the spec's line: {lines}"
    assert len(lines) < 10, f"a line per refusal, not one a second: {lines}"


# -- error_pages and headers -----------------------------------------------------------------


def test_error_pages_and_headers_apply_to_refusals(start, app, users, tmp_path):
    """error_pages for 429, 403, 401 and 413 (stage 21) replace rsp's own
    bodies with the original status, the page and its Content-Type; the
    headers table applies to them; the 429 keeps Retry-After, the 401
    WWW-Authenticate."""
    pages = write_tree(tmp_path / "errors", {"429.html": PAGE_429, "403.html": PAGE_403, "401.html": PAGE_401,
                                             "413.html": PAGE_413})
    proxy = start(app, error_pages={429: str(pages / "429.html"), 403: str(pages / "403.html"),
                                    401: str(pages / "401.html"), 413: str(pages / "413.html")},
                  headers={"X-Frame-Options": "DENY", "X-Policy": "rsp"},
                  limits={"limit_req": limit(3), "deny": ["127.0.0.9"], "basic_auth": auth_table(users),
                          "max_body_size": "1k"})

    def assert_page(r, status, page):
        assert r.status == status, f"expected {status}: {r!r} {r.headers}"
        assert r.header("Content-Type") == "text/html; charset=utf-8", r.headers
        assert r.body == page and r.header("Content-Length") == str(len(page)), r.body[:200]
        assert r.header_values("X-Frame-Options") == ["DENY"] and r.header_values("X-Policy") == ["rsp"], r.headers

    assert_page(fetch_from(proxy, "127.0.0.9"), 403, PAGE_403)
    r = fetch_from(proxy, "127.0.0.2")
    assert_page(r, 401, PAGE_401)
    assert_401(r)
    assert_page(fetch_from(proxy, "127.0.0.2", "/echo", "POST", [basic(USER, PASSWORD)], b"z" * 3000), 413, PAGE_413)
    fetch_from(proxy, "127.0.0.2", headers=[basic(USER, PASSWORD)])
    r = fetch_from(proxy, "127.0.0.2", headers=[basic(USER, PASSWORD)])
    assert_page(r, 429, PAGE_429)
    assert_429(r)
    assert app.requests == 1


def test_refusals_keep_the_connection_usable(start, app, users):
    """A 401 and a 403 answer on a keep-alive connection leave it open for
    the next request (no body to drain); the 429 of limit_req too."""
    proxy = start(app, limits={"limit_req": limit(3), "basic_auth": auth_table(users)})
    with SourceConn(proxy.port, "127.0.0.2") as c:
        assert_401(c.get("/echo"))
        assert c.get("/echo", [basic(USER, PASSWORD)]).status == 200
        assert c.get("/echo", [basic(USER, PASSWORD)]).status == 200
        assert_429(c.get("/echo", [basic(USER, PASSWORD)]))
        assert_429(c.get("/echo", [basic(USER, PASSWORD)]))
    assert app.requests == 2


# -- HTTP/2 -------------------------------------------------------------------------------------


def h2_proxy(start, start_proxy, tmp_path, backend, limits, **options):
    """start_tls_proxy through start_limited (stage 22's settings)."""
    def starting(*backends, **more):
        return start(*backends, limits=limits, **more)
    return start_tls_proxy(starting, tmp_path, backend, **options)


def test_http2_streams_refused_the_same_way(start, start_proxy, app, users, tmp_path):
    """Over HTTP/2 (one connection): with a burst of 4, a stream without
    credentials gets 401 (with WWW-Authenticate), an oversized upload 413,
    two good ones 200, the fifth 429 with Retry-After, then even the
    right password 429; the connection stays up throughout; the backend
    got the two good ones only."""
    proxy = h2_proxy(start, start_proxy, tmp_path, app,
                     {"limit_req": limit(4), "basic_auth": auth_table(users), "max_body_size": "1k"})
    good = [("authorization", basic(USER, PASSWORD)[1])]  # HTTP/2 field names are lowercase
    with h2_client(proxy) as h2:
        s = h2.get("/echo")
        assert s.status == 401 and s.header("www-authenticate") == 'Basic realm="private", charset="UTF-8"', s
        sid = h2.request("POST", "/echo", good, body=b"u" * 4096)
        assert h2.wait_ended(sid).status == 413, h2.streams[sid]
        for i in range(2):
            assert h2.get("/echo", good).status == 200, f"good stream {i + 1}"
        for i in range(2):
            s = h2.get("/echo", good)
            assert s.status == 429, f"stream over the burst ({i + 1}): {s!r}"
            retry = s.header("retry-after")
            refilled = time.monotonic() - _test_started[0]
            assert retry is not None and 1000 - refilled - 1 <= int(retry) <= 1000, (s, refilled)
        assert h2.closed is None and not h2.goaways, f"the connection ended: {h2.describe()}"
    assert app.requests == 2
    wait_refused(proxy, auth=1, body_size=1, limit_req=2)


def test_http2_denied_client(start, start_proxy, app, tmp_path):
    """deny = {127.0.0.1} (the HTTP/2 client's address): each stream a
    403, none reaching the backend, the connection kept."""
    proxy = h2_proxy(start, start_proxy, tmp_path, app, {"deny": ["127.0.0.0/8"], "allow": ["10.0.0.0/8"]})
    with h2_client(proxy) as h2:
        for i in range(3):
            assert h2.get(f"/echo?n={i}").status == 403
        assert h2.closed is None
    assert_nothing_reached(app, "denied streams")
    wait_refused(proxy, deny=3)


# -- levels ------------------------------------------------------------------------------------


def test_site_pool_and_top_level_budgets(start, app, other):
    """The request's site's limit_req, else its pool's, else the top
    level's; one budget per address per level. own.test (burst 4 of its
    own), pooled.test naming pool "app" (burst 3), plain.test and the
    default site (none of their own: the top level's burst 2, one budget
    shared by the two). Spending one leaves the others whole."""
    proxy = start(other, sites={"own.test": {"backends": [app], "limit_req": limit(4)},
                                "plain.test": [app], "pooled.test": {"pool": "app"}},
                  pools={"app": {"backends": [app], "limit_req": limit(3)}},
                  limits={"limit_req": limit(2)})
    src = "127.0.0.2"
    assert statuses(proxy, 5, source=src, host="own.test") == [200] * 4 + [429], "own.test: its own burst of 4"
    assert statuses(proxy, 4, source=src, host="pooled.test") == [200] * 3 + [429], "pooled.test: the pool's 3"
    assert fetch_from(proxy, src, host="plain.test").status == 200
    assert fetch_from(proxy, src).status == 200, "the default site: the top level's budget's second token"
    assert_429(fetch_from(proxy, src, host="plain.test"), "plain.test after the top level's 2 (shared)")
    assert_429(fetch_from(proxy, src), "the default site after the top level's 2 (shared)")
    assert app.requests == 4 + 3 + 1 and other.requests == 1
    doc = wait_refused(proxy, limit_req=4)
    assert status_refused_by_site(doc) == {("own.test", "limit_req"): 1, ("pooled.test", "limit_req"): 1,
                                           ("plain.test", "limit_req"): 1, ("default", "limit_req"): 1}, doc["sites"]
    assert doc["limits"]["addresses"] == 3, f"127.0.0.2 at three levels: {doc['limits']}"


def test_site_without_limit_req_is_not_limited_without_a_top_level(start, app):
    """Only own.test has a limit_req: free.test's requests are never
    refused, however many."""
    proxy = start(sites={"own.test": {"backends": [app], "limit_req": limit(1)}, "free.test": [app]})
    assert statuses(proxy, 2, source="127.0.0.2", host="own.test") == [200, 429]
    assert statuses(proxy, 8, source="127.0.0.2", host="free.test") == [200] * 8


# -- keys ------------------------------------------------------------------------------------------


def test_ipv4_addresses_are_separate_keys(start, app):
    """127.0.0.2 and 127.0.0.3 are two keys: spending one's burst leaves
    the other's whole; a new connection (a new port) from a spent address
    is still refused: the key is the address."""
    proxy = start(app, limits={"limit_req": limit(2)})
    assert statuses(proxy, 3, source="127.0.0.2") == [200, 200, 429]
    assert statuses(proxy, 3, source="127.0.0.3") == [200, 200, 429]
    assert statuses(proxy, 2, source="127.0.0.2") == [429, 429]
    assert app.requests == 4
    doc = wait_refused(proxy, limit_req=4)
    assert doc["limits"]["addresses"] == 2, doc["limits"]


def test_ipv6_loopback_is_one_key(start, start_proxy, app):
    """Over ::1 (rsp listening on every address): one /64, one budget of
    2, apart from 127.0.0.2's."""
    if not ipv6_loopback_available():
        pytest.skip("no IPv6 loopback here")
    port = free_port()
    proxy = start(app, port=port, listen=port, limits={"limit_req": limit(2)})
    assert statuses(proxy, 3, address="::1") == [200, 200, 429]
    assert statuses(proxy, 2, source="127.0.0.2") == [200, 200]
    r = fetch_from(proxy, address="::1")
    assert_429(r, "::1 after its burst")
    assert app.requests == 4


def test_ipv6_keyed_by_64_through_proxy_headers(start, app):
    """PROXY TCP6 addresses: 2001:db8:1:2::1 and 2001:db8:1:2:ffff:1:2:3
    are one /64 (one budget of 2); 2001:db8:1:3::1 is another."""
    proxy = start(app, proxy_protocol=True, limits={"limit_req": limit(2)})
    assert fetch_from(proxy, prefix=proxy_v1("2001:db8:1:2::1")).status == 200
    assert fetch_from(proxy, prefix=proxy_v2("2001:db8:1:2:ffff:1:2:3")).status == 200
    assert_429(fetch_from(proxy, prefix=proxy_v1("2001:db8:1:2::77")), "a third address of the same /64")
    assert statuses(proxy, 3, prefix=proxy_v1("2001:db8:1:3::1")) == [200, 200, 429]
    assert app.requests == 4
    doc = wait_refused(proxy, limit_req=2)
    assert doc["limits"]["addresses"] == 2, doc["limits"]


# -- reload --------------------------------------------------------------------------------------------


def test_reload_changing_limit_req(start, rsp, app, tmp_path):
    """burst 2 -> burst 5 -> no limit_req. After the first reload a new
    address gets exactly 5, then 429; the address spent under burst 2
    gets at most 5 before its 429 (its budget kept or restarted: the spec
    does not say). After the second, nobody is limited."""
    proxy = start(app, limits={"limit_req": limit(2)})
    assert statuses(proxy, 3, source="127.0.0.2") == [200, 200, 429]
    rewrite_limited(rsp, proxy, tmp_path, app, limits={"limit_req": limit(5)})
    sighup(proxy, 2)
    assert statuses(proxy, 6, source="127.0.0.4") == [200] * 5 + [429], "a new address under burst 5"
    spent = statuses(proxy, 6, source="127.0.0.2")
    assert 429 in spent and spent.count(200) <= 5 and spent[spent.index(429):] == [429] * (6 - spent.index(429)), \
        f"the address spent under burst 2, after the reload to burst 5: {spent}"
    rewrite_limited(rsp, proxy, tmp_path, app, limits={})
    sighup(proxy, 3)
    for source in ("127.0.0.2", "127.0.0.4"):
        assert statuses(proxy, 8, source=source) == [200] * 8, f"{source} with limit_req gone"


# -- limit_conn across workers -----------------------------------------------------------------------


def test_limit_conn_across_two_workers(start, app):
    """workers = 2, limit_conn = 2: a connection from 127.0.0.1 on each
    worker; a third from 127.0.0.1 gets 429 with Connection: close and is
    closed; the two keep working, 127.0.0.2 is served; once one of the two
    closes (status.json's connections back to 1), 127.0.0.1 is served
    again."""
    from test_workers import conn_on_worker, started_workers
    proxy = start(app, workers=2, limits={"limit_conn": 2})
    pids = started_workers(proxy, 2)
    held = [conn_on_worker(proxy.port, pid, pids) for pid in pids]
    for conn, r in held:
        assert r.status == 200, r
    with Conn(proxy.port) as third:
        r = third.get("/echo")
        assert r.status == 429 and "close" in r.connection_tokens(), f"the third connection: {r!r} {r.headers}"
        assert third.state(5.0) in ("eof", "reset"), "the connection over limit_conn was not closed"
    for conn, _ in held:
        assert conn.get("/echo").status == 200, "a connection within the limit stopped working"
    assert fetch_from(proxy, "127.0.0.2").status == 200
    held[0][0].close()
    wait_status(proxy, lambda d: d["connections"] == 1, "one client connection left")
    assert fetch_from(proxy, "127.0.0.1").status == 200, "127.0.0.1 after one of its connections closed"
    held[1][0].close()
    assert app.requests == 2 + 2 + 1 + 1
    wait_refused(proxy, limit_conn=1)


# -- the PROXY protocol and trusted_proxies ----------------------------------------------------------------


def test_proxy_protocol_address_meets_deny(start, app):
    """deny = {"10.1.2.3"}: a v1 (and a v2) header naming 10.1.2.3 gets
    403 though the TCP peer is 127.0.0.1 (not denied); one naming
    10.1.2.4 is served, the backend seeing it in X-Forwarded-For."""
    proxy = start(app, proxy_protocol=True, limits={"deny": ["10.1.2.3"]})
    assert fetch_from(proxy, prefix=proxy_v1("10.1.2.3")).status == 403
    assert fetch_from(proxy, prefix=proxy_v2("10.1.2.3")).status == 403
    assert_nothing_reached(app, "denied PROXY addresses")
    r = fetch_from(proxy, prefix=proxy_v1("10.1.2.4"))
    assert r.status == 200, r
    assert echoed(r, "x-forwarded-for") == "10.1.2.4", r.json()["headers"]
    wait_refused(proxy, deny=2)


def test_rate_limited_per_proxy_address_not_per_peer(start, app):
    """burst 2, every connection from the peer 127.0.0.1: 10.0.0.1 (v1)
    gets 2 then 429, 10.0.0.2 (v2) its own 2, and the peer itself (v1
    UNKNOWN, v2 LOCAL: the peer's own address) its own 2."""
    proxy = start(app, proxy_protocol=True, limits={"limit_req": limit(2)})
    assert statuses(proxy, 3, prefix=proxy_v1("10.0.0.1")) == [200, 200, 429]
    assert statuses(proxy, 3, prefix=proxy_v2("10.0.0.2")) == [200, 200, 429]
    assert fetch_from(proxy, prefix=proxy_v1_unknown()).status == 200
    assert fetch_from(proxy, prefix=proxy_v2(local=True)).status == 200
    assert_429(fetch_from(proxy, prefix=proxy_v1_unknown()), "the peer's own address after its 2")
    assert_429(fetch_from(proxy, prefix=proxy_v1("10.0.0.1")), "10.0.0.1 still spent")
    assert app.requests == 6
    doc = wait_refused(proxy, limit_req=4)
    assert doc["limits"]["addresses"] == 3, doc["limits"]


def test_proxy_protocol_garbage_counted_and_reaching_nothing(start, app):
    """On a proxy_protocol listener a plain request (no header) is closed
    without an answer: refused.proxy_protocol counts it, no backend sees it."""
    proxy = start(app, proxy_protocol=True, limits={"limit_req": limit(2)})
    with SourceConn(proxy.port, "127.0.0.2") as c:
        c.send(c.request_bytes("GET", "/echo"))
        assert c.state(10.0) in ("eof", "reset") and not c.reader.buf, "rsp answered a request with no PROXY header"
    assert_nothing_reached(app, "a connection without a PROXY header")
    wait_refused(proxy, proxy_protocol=1)


def test_trusted_proxies_client_feeds_limits(start, app):
    """trusted_proxies = {127.0.0.2}: from 127.0.0.2, the client is the
    right-most untrusted X-Forwarded-For address: 203.0.113.7 gets 2 then
    429, 203.0.113.8 its own 2, 203.0.113.9 is denied; from 127.0.0.3
    (not trusted) X-Forwarded-For is not believed: 127.0.0.3 is the key."""
    proxy = start(app, limits={"limit_req": limit(2), "trusted_proxies": ["127.0.0.2/32"],
                               "deny": ["203.0.113.9"]})

    def via(xff, source="127.0.0.2"):
        return fetch_from(proxy, source, headers=[("X-Forwarded-For", xff)]).status

    assert [via("198.51.100.1, 203.0.113.7") for _ in range(3)] == [200, 200, 429]
    assert [via("203.0.113.8, 127.0.0.2") for _ in range(3)] == [200, 200, 429]
    assert via("203.0.113.9") == 403
    assert [via(f"203.0.113.{i}", "127.0.0.3") for i in (20, 21, 22)] == [200, 200, 429], \
        "an untrusted peer's X-Forwarded-For made its own keys"
    assert app.requests == 6
    wait_refused(proxy, limit_req=3, deny=1)


# -- 50,000 identities ---------------------------------------------------------------------------------


IDENTITIES = 50_000
BATCH = 250                # connections open at once
SOURCES = 64               # TCP source addresses 127.0.2.1.. (ports for 50,000 connections and TIME_WAITs)
HOT = "10.255.255.254"
RSS_GROWTH = 4 * MiB       # what the last 30,000 identities may add to rsp's VmRSS, the table being full


def flood(proxy, first, count):
    """`count` connections each with a PROXY v1 header naming a new
    address (10.0.0.0 + first + i) and a GET /f.txt, BATCH open at once;
    every answer must be a 200 (each address's first request)."""
    done = 0
    while done < count:
        n = min(BATCH, count - done)
        socks = []
        try:
            for i in range(n):
                k = first + done + i
                sock = source_socket(proxy.port, f"127.0.2.{1 + k % SOURCES}")
                socks.append(sock)
                sock.sendall(proxy_v1(nth_ipv4("10.0.0.0", k), sport=1024 + k % 60000)
                             + b"GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            for i, sock in enumerate(socks):
                head = b""
                while b"\r\n" not in head:
                    chunk = sock.recv(4096)
                    assert chunk, f"identity {first + done + i}: the connection ended before a status line"
                    head += chunk
                assert head.startswith(b"HTTP/1.1 200 "), \
                    f"identity {nth_ipv4('10.0.0.0', first + done + i)}: {head[:100]!r}"
        finally:
            for sock in socks:
                sock.close()
        done += n


def hot_request(proxy):
    return fetch_from(proxy, prefix=proxy_v1(HOT), path="/f.txt")


def test_fifty_thousand_identities(start, tmp_path):
    """50,000 client addresses through PROXY v1 headers (files from root:
    no backend to slow it down), limit_req burst 2: status.json's
    "addresses" never above LIMIT_SLOTS, evictions at least 50,000 -
    LIMIT_SLOTS, rsp's VmRSS flat over the last 30,000 (the table full
    from the first 20,000), and HOT, spent before and asked between every
    batch of 5,000 (so never the least recently used of its set: decided,
    a refused request counts as use), still refused at the end."""
    www = write_tree(tmp_path / "www", {"f.txt": b"f\n"})
    proxy = start(root=str(www), proxy_protocol=True, limits={"limit_req": limit(2)})
    assert [hot_request(proxy).status for _ in range(3)] == [200, 200, 429]
    rss = None
    for first in range(0, IDENTITIES, 5000):
        flood(proxy, first, 5000)
        assert_429(hot_request(proxy), f"{HOT} after {first + 5000} identities")
        if first + 5000 == 20000:
            rss = vm_rss(proxy.pid)
    doc = status_json(proxy)
    limits = doc["limits"]
    assert 0 < limits["addresses"] <= LIMIT_SLOTS, limits
    assert limits["evictions"] >= IDENTITIES - LIMIT_SLOTS, limits
    assert refused(doc)["limit_req"] == 1 + IDENTITIES // 5000, refused(doc)
    families = metrics(proxy)
    assert value(families, "rsp_limit_addresses") == limits["addresses"]
    assert value(families, "rsp_limit_evictions_total") == limits["evictions"]
    grown = vm_rss(proxy.pid) - rss
    if not is_sanitized(proxy.binary):
        assert grown < RSS_GROWTH, f"rsp's VmRSS grew by {grown // KiB} KiB over the last 30,000 identities"
