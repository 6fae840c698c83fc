"""Lua routing (stage 07): pools, sites naming a pool, a per-request
`route(req)` function and `route_time_limit`.

Every proxy here is configured through start_proxy's options (pools=,
route=, route_time_limit=, sites={"host": {"pool": "app"}}; see proxy.py),
in front of the HTTP test backends, which name themselves in an
X-Backend header, or a recording backend that keeps every byte it got.
A route that answers `{ status = 200, body = ... }` shows what it saw in
`req`. Each way route can fail must cost that one request a 500 and
nothing else: the next request is served, and the teardown check finds
the proxy alive, without crash or leaked fd. Sockets have a timeout
only to detect a hang; no duration is asserted.
(test_route.py checks the same chapter with hand-written config files.)"""

import random
import re
import time

import pytest

from backends import record_request
from checks import assert_config_error, assert_rsp_page
from client import exchange
from netutil import LOOPBACK, closed_ports, free_port
from proxy import proxy_arguments, run_rsp
from test_http import (as_forwarded, chunked, forwarded_headers, http_request, kept_and_added, recorded,
                       split_forwarded)

CLIENT_TIMEOUT = 10.0  # a hang detector, never a measurement
LOG_TIMEOUT = 5.0      # a bound on waiting for a log line that must come


# -- helpers -------------------------------------------------------------------

def ask(port, target="/echo", host="www.example.com", method="GET", version="HTTP/1.1", headers=(),
        body=b"", source=LOOPBACK):
    """One request (see test_http.http_request: no header is added but
    Host, unless host is None, and Connection: close) from the local
    address `source` (any 127.x.y.z works on Linux loopback); returns the
    Response."""
    return exchange(port, http_request(host, method, target, version, headers, body), source=source,
                    timeout=CLIENT_TIMEOUT)


def backend_of(r):
    """The name of the test backend that answered (its X-Backend header:
    a 404 of the test backend counts too); fails if rsp answered itself."""
    name = r.header("X-Backend")
    assert name is not None, f"not answered by a test backend: {r.raw[:300]!r}"
    return name


def body_of(r):
    """The body of a 200 that route answered with a response table."""
    assert r.status == 200 and r.header("X-Backend") is None, f"expected route's 200: {r.raw[:300]!r}"
    return r.body.decode("latin-1")


def wait_for_log(proxy, since, *texts):
    """The part of the proxy's stderr after offset `since`, once it holds
    every one of `texts` (fails after LOG_TIMEOUT)."""
    deadline = time.monotonic() + LOG_TIMEOUT
    while True:
        log = proxy.stderr()[since:]
        if all(t in log for t in texts):
            return log
        if time.monotonic() > deadline:
            missing = [t for t in texts if t not in log]
            pytest.fail(f"rsp's stderr lacks {missing} after the request; it logged:\n{log}")
        time.sleep(0.02)


@pytest.fixture
def app_and_static(make_backend):
    """Two HTTP test backends, named "app" and "static"."""
    return make_backend("app"), make_backend("static")


# -- choosing a pool -------------------------------------------------------------

BY_PATH = """
function route(req)
  if req.path:find("^/static/") then return "static" end
  return "app"
end
"""

STATIC_TARGETS = ["/static/x", "/%73tatic/x", "/a/../static/x", "/.//static/x", "/%73%74%61%74%69%63/x",
                  "/./static/x", "/b/%2e%2E/static/x", "/../static/x", "/..///static//x"]
APP_TARGETS = ["/echo", "/static", "/statics/x", "/x/static/y", "/stat/ic/x", "/%73tatic", "/x/../echo"]


@pytest.mark.stage(7)
def test_route_by_path_prefix_sees_the_normalized_path(app_and_static, start_proxy):
    """/static/... goes to the static pool, everything else to app; other
    spellings of a /static/ path (escaped letters, dot segments, doubled
    slashes) go to static too. The backend gets the normalized path route
    judged. (An escaped slash is refused before route: test_hardening.py.)"""
    app, static = app_and_static
    proxy = start_proxy(pools={"app": [app], "static": [static]}, route=BY_PATH)
    wrong = [(t, backend_of(ask(proxy.port, t))) for t in STATIC_TARGETS]
    wrong = [(t, got) for t, got in wrong if got != "static"]
    wrong += [(t, got) for t, got in ((t, backend_of(ask(proxy.port, t))) for t in APP_TARGETS) if got != "app"]
    assert wrong == [], f"(target, pool that got it) for targets routed to the wrong pool: {wrong}"
    assert static.total_hits == len(STATIC_TARGETS) and app.total_hits == len(APP_TARGETS)
    # the backend gets what route judged (the test backend counts the path it got)
    assert dict(static.hits) == {"/static/x": len(STATIC_TARGETS)}, dict(static.hits)
    assert app.hits["/static"] == 2 and app.hits["/echo"] == 2, dict(app.hits)


PATH_AND_QUERY = 'function route(req) return { status = 200, body = req.path .. "|" .. req.query } end'

PATHS = [
    # (method, target, Host, req.path .. "|" .. req.query)
    ("GET", "/", "www.example.com", "/|"),
    ("GET", "/a/b?x=1&y=2", "www.example.com", "/a/b|x=1&y=2"),
    ("GET", "/%7Euser/%41%62%2d%5F%2e%7e", "www.example.com", "/~user/Ab-_.~|"),
    ("GET", "/a%2fb/%2Fc%5c", "www.example.com", "/a%2Fb/%2Fc%5C|"),
    ("GET", "/%e2%82%ac/%3f", "www.example.com", "/%E2%82%AC/%3F|"),
    ("GET", "/%zz/a%4", "www.example.com", "/%25zz/a%254|"),
    ("GET", "/a///b//", "www.example.com", "/a/b/|"),
    ("GET", "/a/./b/../c", "www.example.com", "/a/c|"),
    ("GET", "/../../a", "www.example.com", "/a|"),
    ("GET", "/a/b/..", "www.example.com", "/a/|"),
    ("GET", "/a/%2e%2E/b", "www.example.com", "/b|"),
    ("GET", "/a/.b/..c/", "www.example.com", "/a/.b/..c/|"),
    ("GET", "/p?a=%41&b=/../c", "www.example.com", "/p|a=%41&b=/../c"),
    ("GET", "/p?", "www.example.com", "/p|"),
    ("GET", "/p?x?y", "www.example.com", "/p|x?y"),
    ("GET", "/%2e%2e/p?%2e", "www.example.com", "/p|%2e"),
    ("GET", "http://www.example.com/a/%62/../c?z=1", "www.example.com", "/a/c|z=1"),
    ("GET", "http://www.example.com", "www.example.com", "/|"),
    ("GET", "http://www.example.com?q", "www.example.com", "/|q"),
    ("OPTIONS", "*", "www.example.com", "*|"),
]


@pytest.mark.stage(7)
def test_req_path_and_query(start_proxy):
    """req.path is the normalized path (unreserved escapes decoded, other
    escapes upper-cased and kept, a stray % as %25, slashes merged, dot
    segments removed, the path of an absolute-form target, "*" as is);
    req.query is what follows the first "?", as sent, or "". (Escaped
    slashes reach route only with allow_encoded_slashes = true.)"""
    # no backends, no sites: route answers everything
    proxy = start_proxy(route=PATH_AND_QUERY, allow_encoded_slashes=True)
    wrong = []
    for method, target, host, expected in PATHS:
        got = body_of(ask(proxy.port, target, host=host, method=method))
        if got != expected:
            wrong.append((target, expected, got))
    assert wrong == [], "(target, expected path|query, got):\n" + "\n".join(map(repr, wrong))


FIELDS = 'function route(req) return { status = 200, body = table.concat({ req.method, req.version, ' \
         'req.target, req.host }, "|") } end'


@pytest.mark.stage(7)
def test_req_method_version_target_and_host(start_proxy):
    """req.method and req.target as sent, req.version "1.0"/"1.1",
    req.host lower-cased without port or trailing dot ("" for HTTP/1.0
    without Host; the authority of an absolute-form target)."""
    proxy = start_proxy(route=FIELDS)
    cases = [
        (dict(target="/a/../b?x=%41", host="WWW.Example.COM.:8080"), "GET|1.1|/a/../b?x=%41|www.example.com"),
        (dict(method="DELETE", target="/x", host=None, version="HTTP/1.0"), "DELETE|1.0|/x|"),
        (dict(method="POST", target="/p", host="127.0.0.1:80", headers=[("Content-Length", "3")], body=b"abc"),
         "POST|1.1|/p|127.0.0.1"),
        (dict(method="PATCH", target="http://Api.Example.com:81/v1?k", host=None, version="HTTP/1.0"),
         "PATCH|1.0|http://Api.Example.com:81/v1?k|api.example.com"),
        (dict(target="/", host="Example.ORG"), "GET|1.1|/|example.org"),
    ]
    for request, expected in cases:
        assert body_of(ask(proxy.port, **request)) == expected, request
    r = ask(proxy.port, "/h", host="Shop.example.com.", method="HEAD")
    expected = "HEAD|1.1|/h|shop.example.com"
    assert r.status == 200 and r.body == b"", r.raw[:300]
    assert r.header("Content-Length") == str(len(expected)), r.headers


REDIRECT = """
function route(req)
  if req.host == "old.example.com" then
    return { status = 301, location = "https://new.example.com" .. req.path }
  end
  return "app"
end
"""


@pytest.mark.stage(7)
def test_route_by_host_redirects(make_backend, start_proxy):
    """A permanent redirect for one host, answered by rsp with the exact
    Location, a page of the announced length and Connection: close; the
    backend never hears of it. Other hosts reach the app pool."""
    app = make_backend("app")
    proxy = start_proxy(pools={"app": [app]}, route=REDIRECT)
    cases = [
        (dict(target="/a/../p/%7e?x=1", host="OLD.Example.COM:8080"), "https://new.example.com/p/~"),
        (dict(target="/", host="old.example.com."), "https://new.example.com/"),
        (dict(target="http://OLD.example.com:8080/q%3f", host=None, version="HTTP/1.0"),
         "https://new.example.com/q%3F"),
    ]
    for request, location in cases:
        r = ask(proxy.port, **request)
        assert_rsp_page(r, 301, "Moved Permanently")
        assert r.header("Location") == location, (request, r.headers)
    assert app.total_hits == 0
    assert backend_of(ask(proxy.port, "/echo", host="new.example.com")) == "app"
    assert backend_of(ask(proxy.port, "/echo", host="old.example.com.evil")) == "app"
    assert app.total_hits == 2


BY_HEADER = """
function route(req)
  if req.headers["x-blocked"] then return { status = 403 } end
  if req.path == "/headers" then
    return { status = 200, body = tostring(req.headers["x-multi"]) .. "|" .. tostring(req.headers["X-Multi"])
                                  .. "|" .. tostring(req.headers["user-agent"]) .. "|" .. req.headers.host }
  end
  return "app"
end
"""


@pytest.mark.stage(7)
def test_route_by_header(make_backend, start_proxy):
    """A request with X-Blocked (any case) gets rsp's 403 and never reaches
    the backend; req.headers has lower-case names, and a header sent
    several times gives its values joined with ", " in order."""
    app = make_backend("app")
    proxy = start_proxy(pools={"app": [app]}, route=BY_HEADER)
    for line in ("X-Blocked: 1", "x-BLOCKED: yes"):
        r = ask(proxy.port, "/echo", headers=[line.encode()])
        assert_rsp_page(r, 403, "Forbidden")
    assert app.total_hits == 0
    r = ask(proxy.port, "/echo", headers=[("X-Not-Blocked", "1")])
    assert r.status == 200 and backend_of(r) == "app", r.raw[:300]
    r = ask(proxy.port, "/headers", host="Www.Example.com",
            headers=[("X-Multi", "one"), ("User-Agent", "t/1"), ("x-multi", "two"), ("X-MULTI", "three")])
    assert body_of(r) == "one, two, three|nil|t/1|Www.Example.com"
    assert app.total_hits == 1


BY_CLIENT = """
function route(req)
  if req.path == "/client" then return { status = 200, body = req.client } end
  if req.client == "127.0.0.2" then return "static" end
  return "app"
end
"""


@pytest.mark.stage(7)
def test_route_by_client_address(app_and_static, start_proxy):
    """req.client is the client's address as text: requests from
    127.0.0.2 go to static, from 127.0.0.1 to app (and the backend still
    gets X-Real-IP as in stage 06)."""
    app, static = app_and_static
    proxy = start_proxy(pools={"app": [app], "static": [static]}, route=BY_CLIENT)
    for source, pool in (("127.0.0.2", "static"), ("127.0.0.1", "app"), ("127.0.0.2", "static")):
        assert body_of(ask(proxy.port, "/client", source=source)) == source
        r = ask(proxy.port, "/echo", source=source)
        assert r.status == 200 and backend_of(r) == pool, (source, r.raw[:300])
        assert ["X-Real-IP", source] in r.json()["headers"], r.json()["headers"]
    assert static.total_hits == 2 and app.total_hits == 1


@pytest.mark.stage(7)
def test_malformed_requests_never_reach_route(start_proxy):
    """Only valid requests reach route: one stage 06 refuses gets its 400
    even though route would answer everything with a 200."""
    proxy = start_proxy(route='function route(req) return { status = 200, body = "route ran" } end')
    refused = [
        b"GET /x HTTP/1.1\r\nAccept: */*\r\n\r\n",                          # HTTP/1.1 without Host
        b"GET /x HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",      # two Hosts
        http_request("www.example.com", target="http://shop.example.com/x"),   # Host disagrees
        http_request("www.example.com", method="POST", target="/x",            # two framings
                     headers=[("Content-Length", "5"), ("Transfer-Encoding", "chunked")], body=b"0\r\n\r\n"),
    ]
    for data in refused:
        assert_rsp_page(exchange(proxy.port, data, timeout=CLIENT_TIMEOUT), 400, "Bad Request")
    assert body_of(ask(proxy.port, "/x")) == "route ran"


@pytest.mark.stage(7)
def test_pool_chosen_by_route_fails_over_and_gives_502(make_backend, start_proxy):
    """A pool route names behaves like a stage 06 site's: a backend that
    refuses connections is skipped for a live one; a pool with only dead
    backends gets rsp's 502."""
    live = make_backend("live")
    dead = [(LOOPBACK, p) for p in closed_ports(2)]  # nothing listens there
    proxy = start_proxy(pools={"mixed": [dead[0], live], "dead": [dead[1]]},
                        route='function route(req) if req.path == "/dead" then return "dead" end return "mixed" end')
    assert [backend_of(ask(proxy.port, "/echo")) for _ in range(4)] == ["live"] * 4
    assert_rsp_page(ask(proxy.port, "/dead"), 502, "Bad Gateway")
    assert live.total_hits == 4


# -- nil: stage 06 routing ----------------------------------------------------------

FALLBACK = """
function route(req)
  if req.path == "/explicit-nil/echo" then return nil end
  if req.path == "/by-route/echo" then return "app" end
end
"""


@pytest.mark.stage(7)
def test_nil_falls_back_to_sites_and_default_site(make_backend, start_proxy):
    """route returning nil (or nothing): the site for Host (one naming a
    pool, one with its own backends), else the default site, else 421."""
    app, own, default = make_backend("app"), make_backend("own"), make_backend("default")
    options = dict(pools={"app": [app]}, route=FALLBACK,
                   sites={"www.example.com": {"pool": "app"}, "*.own.example": [own]})
    with_default = start_proxy(default, **options)
    without_default = start_proxy(**options)
    for proxy in (with_default, without_default):
        for target in ("/echo", "/explicit-nil/echo"):
            assert backend_of(ask(proxy.port, target, host="www.example.com")) == "app"
            assert backend_of(ask(proxy.port, target, host="a.OWN.example")) == "own"
        assert backend_of(ask(proxy.port, "/by-route/echo", host="nowhere.example")) == "app"
    for target in ("/echo", "/explicit-nil/echo"):
        assert backend_of(ask(with_default.port, target, host="nowhere.example")) == "default"
        assert_rsp_page(ask(without_default.port, target, host="nowhere.example"), 421, "Misdirected Request")
    assert (app.total_hits, own.total_hits, default.total_hits) == (6, 4, 2)


@pytest.mark.stage(7)
def test_route_only_config_returning_nil_gets_421(start_proxy):
    """A config with only a route (no backends, no sites) starts; a
    request route leaves to stage 06 routing finds no site: 421."""
    proxy = start_proxy(route='function route(req) if req.path == "/" then return { status = 200, body = "hi" } end end')
    assert body_of(ask(proxy.port, "/")) == "hi"
    assert_rsp_page(ask(proxy.port, "/other"), 421, "Misdirected Request")


@pytest.mark.stage(7)
def test_pool_shared_by_a_site_and_route(make_backend, start_proxy):
    """A site naming a pool and route naming it use the same pool: one
    round-robin rotation over its two backends, whichever way requests
    come in."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(pools={"app": {"backends": [a, b], "balance": "round_robin"}},
                        sites={"www.example.com": {"pool": "app"}},
                        route='function route(req) if req.host == "route.example" then return "app" end end')
    seen = [backend_of(ask(proxy.port, "/echo", host=h)) for h in ("www.example.com", "route.example") * 3]
    assert set(seen) == {"a", "b"} and all(x != y for x, y in zip(seen, seen[1:])), \
        f"one rotation would alternate; got {seen} for site, route, site, route, ..."
    assert a.total_hits == b.total_hits == 3


# -- response tables ----------------------------------------------------------------

ANSWERS = r"""
function route(req)
  local p = req.path
  if p == "/headers" then
    return { status = 200, headers = { ["X-Str"] = "s", ["X-Num"] = 42, ["Set-Cookie"] = { "a=1", "b=2; Path=/" } } }
  end
  if p == "/text" then return { status = 201, body = "made\n" } end
  if p == "/json" then return { status = 200, body = '{"ok":true}', headers = { ["content-type"] = "application/json" } } end
  if p == "/empty" then return { status = 200 } end
  if p == "/gone" then return { status = 410 } end
  if p == "/nothing" then return { status = 204 } end
  if p == "/not-modified" then return { status = 304, headers = { ETag = '"v1"' } } end
  if p == "/found" then return { status = 302, location = "/elsewhere", body = "see /elsewhere" } end
end
"""


def without_date(headers):
    return [h for h in headers if h[0].lower() != "date"]


@pytest.mark.stage(7)
def test_response_tables(backend, start_proxy):
    """What rsp sends for route's response tables: the headers given
    (a number as text, a list as one line per element), Content-Length and
    Connection: close added, a body with text/plain unless a Content-Type
    is given, an empty body for a 2xx without one, rsp's page for a 4xx
    without one, nothing (and no Content-Length) for 204 and 304, and for
    HEAD the same headers without the body. The backend is never asked."""
    proxy = start_proxy(backend, route=ANSWERS)

    r = ask(proxy.port, "/headers")
    assert r.raw.startswith(b"HTTP/1.1 200 OK\r\n"), r.raw[:300]
    assert r.header("X-Str") == "s" and r.header("X-Num") == "42", r.headers
    assert [v for n, v in r.headers if n.lower() == "set-cookie"] == ["a=1", "b=2; Path=/"], r.headers
    assert r.header("Content-Length") == "0" and r.body == b"", r.raw[:300]
    assert r.header("Connection") == "close" and not r.reset

    r = ask(proxy.port, "/text")
    assert r.raw.startswith(b"HTTP/1.1 201 Created\r\n") and r.body == b"made\n", r.raw[:300]
    assert r.header("Content-Type") == "text/plain; charset=utf-8" and r.header("Content-Length") == "5", r.headers
    head = ask(proxy.port, "/text", method="HEAD")
    assert head.raw.startswith(b"HTTP/1.1 201 Created\r\n") and head.body == b"", head.raw[:300]
    assert without_date(head.headers) == without_date(r.headers)

    r = ask(proxy.port, "/json")
    assert r.body == b'{"ok":true}' and r.header("Content-Length") == "11", r.raw[:300]
    assert [v for n, v in r.headers if n.lower() == "content-type"] == ["application/json"], r.headers

    r = ask(proxy.port, "/empty")
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "0", r.raw[:300]

    r = ask(proxy.port, "/gone")
    assert_rsp_page(r, 410, "Gone")
    head = ask(proxy.port, "/gone", method="HEAD")
    assert head.status == 410 and head.body == b"", head.raw[:300]
    assert head.header("Content-Length") == r.header("Content-Length"), head.headers

    for target, status, reason in (("/nothing", 204, "No Content"), ("/not-modified", 304, "Not Modified")):
        r = ask(proxy.port, target)
        assert r.raw.startswith(f"HTTP/1.1 {status} {reason}\r\n".encode()), r.raw[:300]
        assert r.body == b"" and r.header("Content-Length") is None, r.raw[:300]
        assert r.header("Connection") == "close" and not r.reset
    assert r.header("ETag") == '"v1"', r.headers

    r = ask(proxy.port, "/found")
    assert r.raw.startswith(b"HTTP/1.1 302 Found\r\n") and r.header("Location") == "/elsewhere", r.raw[:300]
    assert r.body == b"see /elsewhere" and r.header("Content-Type") == "text/plain; charset=utf-8"
    assert backend.total_hits == 0


# -- request bodies --------------------------------------------------------------

BODIES_ROUTE = """
function route(req)
  if req.path == "/answer" then return { status = 202, body = "answered by route\\n" } end
  if req.method == "POST" then return "up" end
end
"""


@pytest.mark.stage(7)
def test_post_bodies_reach_the_pool_byte_exact(make_raw_backend, start_proxy, stage):
    """A POST body framed by Content-Length or chunked goes, byte for byte
    and framing included, to the pool route chose, with the request line
    and headers as stage 06 forwards them (from stage 17 a chunked body
    as its data alone, with a Content-Length: test_http.as_forwarded); a
    POST that route answers itself gets that answer (rsp drops its body)
    and a close, not a reset."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(pools={"up": [recorder]}, route=BODIES_ROUTE)
    data = bytes(range(256)) * 400
    framed = [([("Content-Length", str(len(data)))], data),
              ([("Transfer-Encoding", "chunked")], chunked(data, random.Random(7), sizes=(1, 100, 5000)))]
    for i, (headers, body) in enumerate(framed):
        r = ask(proxy.port, f"/upload?n={i}", method="POST", headers=headers, body=body)
        assert r.status == 200 and backend_of(r) == "recorder", r.raw[:300]
        lines, body = as_forwarded(stage, headers, body)
        assert r.json()["body_length"] == len(body)
        (stream,) = recorded(recorder, before=i)
        request_line, header_lines, rest = split_forwarded(stream)
        assert request_line == f"POST /upload?n={i} HTTP/1.1"
        kept, added = kept_and_added(header_lines)  # forwarded as stage 06 does
        assert kept == ["Host: www.example.com"] + lines, header_lines
        assert added == forwarded_headers("www.example.com", stage, proxy.port), header_lines
        assert rest == body, f"the backend got {len(rest)} bytes after the head, sent {len(body)}"
    for headers, body in framed * 2:
        r = ask(proxy.port, "/answer", method="POST", headers=headers, body=body)
        assert r.raw.startswith(b"HTTP/1.1 202 Accepted\r\n"), r.raw[:300]
        assert r.body == b"answered by route\n" and not r.reset, r.raw[:300]
    assert recorder.connections == 2


# -- failures ------------------------------------------------------------------------

FAILING = r"""
function route(req)
  local p = req.path
  if p == "/error" then error("boom") end
  if p == "/index-nil" then return req.no.such.field end
  if p == "/return-42" then return 42 end
  if p == "/return-true" then return true end
  if p == "/return-function" then return function() end end
  if p == "/unknown-pool" then return "no-such-pool" end
  if p == "/status-missing" then return { body = "x" } end
  if p == "/status-x" then return { status = "x" } end
  if p == "/status-99" then return { status = 99 } end
  if p == "/status-600" then return { status = 600 } end
  if p == "/status-fraction" then return { status = 200.5 } end
  if p == "/header-name-space" then return { status = 200, headers = { ["a b"] = "x" } } end
  if p == "/header-name-empty" then return { status = 200, headers = { [""] = "x" } } end
  if p == "/header-injection" then return { status = 200, headers = { ["X-A"] = "a\r\nSet-Cookie: evil=1" } } end
  if p == "/header-lf" then return { status = 200, headers = { ["X-A"] = "a\nevil: 1" } } end
  if p == "/header-nul" then return { status = 200, headers = { ["X-A"] = "a\0evil" } } end
  if p == "/header-list-injection" then return { status = 200, headers = { ["X-A"] = { "ok", "b\r\nevil: 1" } } } end
  if p == "/content-length" then return { status = 200, body = "x", headers = { ["Content-Length"] = "1" } } end
  if p == "/transfer-encoding" then return { status = 200, headers = { ["transfer-encoding"] = "chunked" } } end
  if p == "/connection" then return { status = 200, headers = { Connection = "keep-alive" } } end
  if p == "/two-locations" then return { status = 302, location = "/a", headers = { location = "/b" } } end
  if p == "/body-with-204" then return { status = 204, body = "x" } end
  if p == "/body-with-304" then return { status = 304, body = "x" } end
  if p == "/body-table" then return { status = 200, body = {} } end
  if p == "/location-number" then return { status = 301, location = 42 } end
  return "app"
end
"""

FAILURES = ["/error", "/index-nil", "/return-42", "/return-true", "/return-function", "/unknown-pool",
            "/status-missing", "/status-x", "/status-99", "/status-600", "/status-fraction",
            "/header-name-space", "/header-name-empty", "/header-injection", "/header-lf", "/header-nul",
            "/header-list-injection", "/content-length", "/transfer-encoding", "/connection",
            "/two-locations", "/body-with-204", "/body-with-304", "/body-table", "/location-number"]

# more of what the log entry for a failure must say: the Lua message and
# traceback, the pool name, the field or header at fault
FAILURE_LOG = {
    "/error": ("boom", "stack traceback"),
    "/unknown-pool": ("no-such-pool",),
    **{p: ("status",) for p in ("/status-missing", "/status-x", "/status-99", "/status-600", "/status-fraction")},
    "/header-name-space": ("a b",),
    **{p: ("X-A",) for p in ("/header-injection", "/header-lf", "/header-nul", "/header-list-injection")},
    "/content-length": ("Content-Length",),
    "/transfer-encoding": ("transfer-encoding",),
    "/connection": ("Connection",),
    "/body-with-204": ("body",),
    "/body-with-304": ("body",),
    "/body-table": ("body",),
    "/location-number": ("location",),
}


@pytest.mark.stage(7)
def test_each_failure_is_a_500_for_that_request_only(backend, start_proxy):
    """A Lua error, a bad return value, an unknown pool, a bad response
    table: rsp's 500 page for that request (nothing of a header value with
    CR/LF reaches the client), a log entry about route, and the next
    request is served by the pool as usual."""
    proxy = start_proxy(pools={"app": [backend]}, route=FAILING)
    for path in FAILURES:
        since = len(proxy.stderr())
        r = ask(proxy.port, path)
        assert r.status == 500, (path, r.raw[:300])
        assert_rsp_page(r, 500, "Internal Server Error")
        assert b"evil" not in r.raw and r.header("Set-Cookie") is None, (path, r.raw[:300])
        wait_for_log(proxy, since, "route", *FAILURE_LOG.get(path, ()))
        ok = ask(proxy.port, "/echo")
        assert ok.status == 200 and backend_of(ok) == "a", (path, ok.raw[:300])
    assert backend.hits["/echo"] == len(FAILURES) and backend.total_hits == len(FAILURES), dict(backend.hits)


LOOPS = r"""
local function spin() local n = 0 while true do n = n + 1 end end
function route(req)
  if req.path == "/loop" then while true do end end
  if req.path == "/loop-in-pcall" then while true do pcall(function() while true do end end) end end
  if req.path == "/loop-in-helper" then spin() end
  return "app"
end
"""


@pytest.mark.stage(7)
def test_time_limit_stops_endless_loops(backend, start_proxy):
    """With route_time_limit = 0.05, an endless loop (plain, inside pcall,
    in a helper defined outside route) is stopped: a 500, "time limit" in
    the log, and the next request is served. Twice each, so that a loop
    run again (hot for a JIT) is stopped too. (The client's socket timeout
    is only a hang detector.)"""
    proxy = start_proxy(pools={"app": [backend]}, route_time_limit=0.05, route=LOOPS)
    for path in ("/loop", "/loop-in-pcall", "/loop-in-helper") * 2:
        since = len(proxy.stderr())
        r = ask(proxy.port, path)
        assert r.status == 500, (path, r.raw[:300])
        assert_rsp_page(r, 500, "Internal Server Error")
        wait_for_log(proxy, since, "route", "time limit")
        ok = ask(proxy.port, "/echo")
        assert ok.status == 200 and backend_of(ok) == "a", (path, ok.raw[:300])
    assert backend.total_hits == 6


# -- the config --------------------------------------------------------------------

B = (LOOPBACK, 1)  # a backend address nothing has to answer at: these configs never serve
NIL_ROUTE = "function route(req) return nil end"
WWW = 'sites["www.example.com"]'

CONFIG_ERRORS = [
    # (id, options, the setting the message must name, in quotes, other words it must contain)
    ("route-number", dict(route="route = 42"), "route", ()),
    ("route-string", dict(route='route = "app"'), "route", ()),
    ("pools-number", dict(pools=5), "pools", ()),
    ("pool-name-with-space", dict(pools={"my pool": [B]}), "pools", ()),
    ("pool-name-too-long", dict(pools={"p" * 65: [B]}), "pools", ()),
    ("pool-name-empty", dict(pools={"": [B]}), "pools", ()),
    ("pool-not-a-table", dict(pools={"app": "127.0.0.1:1"}), "pools.app", ()),
    ("pool-without-backends", dict(pools={"app": {"balance": "round_robin"}}), "pools.app.backends", ()),
    ("pool-backends-empty", dict(pools={"app": []}), "pools.app.backends", ()),
    ("pool-balance-unknown", dict(pools={"app": {"backends": [B], "balance": "random"}}), "pools.app.balance", ()),
    ("site-names-missing-pool", dict(pools={"app": [B]}, sites={"www.example.com": {"pool": "missing"}}),
     f"{WWW}.pool", ("missing",)),
    ("site-pool-and-backends", dict(pools={"app": [B]}, sites={"www.example.com": {"pool": "app", "backends": [B]}}),
     WWW, ()),
    ("site-pool-number", dict(pools={"app": [B]}, sites={"www.example.com": {"pool": 1}}), f"{WWW}.pool", ()),
    ("route_time_limit-0", dict(route_time_limit=0, route=NIL_ROUTE), "route_time_limit", ()),
    ("route_time_limit-100", dict(route_time_limit=100, route=NIL_ROUTE), "route_time_limit", ()),
    ("route_time_limit-too-small", dict(route_time_limit=0.0009, route=NIL_ROUTE), "route_time_limit", ()),
    ("route_time_limit-string", dict(route_time_limit="0.1", route=NIL_ROUTE), "route_time_limit", ()),
]


@pytest.mark.stage(7)
@pytest.mark.parametrize("options, setting, words", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_bad_routing_config(rsp, tmp_path, options, setting, words):
    """A config with a default site and one mistake in the stage 07
    settings: exit status 1 and exactly one line on stderr, naming the
    file and the setting in quotes; nothing on stdout."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), options)
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, setting, words=words)


@pytest.mark.stage(7)
@pytest.mark.parametrize("limit", [0.001, 10])
def test_limits_accepted_and_startup_log(make_backend, start_proxy, limit):
    """The smallest and the largest time limit, and a pool name of 64
    characters of every allowed kind, are accepted; the startup log has a
    line per pool and one for route with its time limit."""
    a, b = make_backend("a"), make_backend("b")
    name = "Az09_-." + "p" * 57
    proxy = start_proxy(pools={name: {"backends": [a, b], "balance": "least_conn"}, "other": [b]},
                        route_time_limit=limit, route=f'function route(req) return "{name}" end')
    assert backend_of(ask(proxy.port, "/echo")) in ("a", "b")
    log = proxy.stderr()
    assert f"pool {name}: 2 backends, least_conn" in log, log
    number = re.escape(f"{limit:g}")
    assert [line for line in log.splitlines()
            if "route" in line and "limit" in line and re.search(rf"[ (]{number}(\.0*)? ?s\b", line)], log
