"""Hardening of what rsp forwards (stage 06 on; encoded slashes and the
forwarded path stage 07 on).

- Request targets (RFC 9112, section 3.2): origin-form; absolute-form only
  for http and https, forwarded in origin-form with the target's authority
  as the one Host; "*" only with OPTIONS; CONNECT gets rsp's 405; every
  other form rsp's 400, before any backend hears of it.
- Header names with "_" are dropped (allow_underscores_in_headers = true
  keeps them), a client's Forwarded, X-Original-URL and X-Rewrite-URL too,
  and X-Forwarded-Port, -Ssl, -Scheme, -Prefix, X-Url-Scheme and
  Front-End-Https; rsp adds its own Forwarded and X-Forwarded-Port.
- Stage 07: a path with an escaped slash or backslash (%2F, %5C), or a
  raw backslash, gets a 400 before route is called
  (allow_encoded_slashes = true lets it through), and the backend gets exactly the normalized path route
  judged, with the query as sent.

Two nginx tests show what the holes were for: a backend that honours
another scheme's authority, or decodes %2F, serves what rsp meant to keep
from it. What a backend received is read byte for byte from a recording
backend (backends.record_request). Waiting is a bounded poll; nothing is
timed."""

import os
import posixpath

import pytest

from backends import Nginx, read_head, record_request
from checks import assert_config_error, assert_rsp_page
from client import exchange
from netutil import free_port, ipv6_loopback_available
from proxy import proxy_arguments, run_rsp
from test_http import (forwarded_headers, forwarded_line, http_request, kept_and_added, recorded, shared,
                       split_forwarded, wait_for)  # noqa: F401 (shared: a fixture)
from test_lua_routing import ask, body_of


# -- helpers -------------------------------------------------------------------

@pytest.fixture(scope="module")
def recording(shared):
    """(a recording backend, a proxy with it as the default site), shared
    by the cases of a table."""
    recorder = shared.raw_backend(record_request)
    return recorder, shared.proxy(recorder)


def forwarded_head(recorder, r, before):
    """(request line, the client's header lines, rsp's header lines) of
    the one request the recording backend got after the first `before`,
    once r, the client's answer, shows it came from there."""
    assert r.status == 200 and r.header("X-Backend") == "recorder", f"{r!r} {r.raw[:300]!r}"
    (stream,) = recorded(recorder, before=before)
    request_line, header_lines, rest = split_forwarded(stream)
    assert rest == b""
    kept, added = kept_and_added(header_lines)
    return request_line, kept, added


def assert_refused(recorder, r, before, status=400, reason="Bad Request"):
    """r is rsp's own answer `status`, and no connection reached the
    recording backend since it had `before`."""
    assert_rsp_page(r, status, reason)
    assert recorder.connections == before and len(recorder.received) == before, \
        "a refused request reached the backend"


# -- request-target forms --------------------------------------------------------

ABSOLUTE = [
    # (id, method, target, version, Host header or None, request line forwarded, Host forwarded)
    ("path-and-query", "GET", "http://www.example.com/echo?a=1", "HTTP/1.1", "www.example.com",
     "GET /echo?a=1 HTTP/1.1", "www.example.com"),
    ("upper-case-scheme", "GET", "HTTP://www.example.com/echo", "HTTP/1.1", "www.example.com",
     "GET /echo HTTP/1.1", "www.example.com"),
    ("https", "GET", "https://www.example.com/s?k=v", "HTTP/1.1", "www.example.com",
     "GET /s?k=v HTTP/1.1", "www.example.com"),
    ("mixed-case-https", "POST", "HtTpS://www.example.com/p", "HTTP/1.1", "www.example.com",
     "POST /p HTTP/1.1", "www.example.com"),
    ("empty-path", "GET", "http://www.example.com", "HTTP/1.1", "www.example.com",
     "GET / HTTP/1.1", "www.example.com"),
    ("empty-path-with-query", "GET", "http://www.example.com?x=1", "HTTP/1.1", "www.example.com",
     "GET /?x=1 HTTP/1.1", "www.example.com"),
    ("options-empty-path", "OPTIONS", "http://www.example.com", "HTTP/1.1", "www.example.com",
     "OPTIONS * HTTP/1.1", "www.example.com"),
    ("options-with-path", "OPTIONS", "http://www.example.com/o", "HTTP/1.1", "www.example.com",
     "OPTIONS /o HTTP/1.1", "www.example.com"),
    ("port-kept", "GET", "http://www.example.com:8080/p", "HTTP/1.1", "www.example.com:8080",
     "GET /p HTTP/1.1", "www.example.com:8080"),
    ("client-host-not-forwarded", "GET", "http://www.example.com/p", "HTTP/1.1", "WWW.EXAMPLE.COM",
     "GET /p HTTP/1.1", "www.example.com"),
    ("authority-as-written", "GET", "http://WWW.Example.com/p", "HTTP/1.1", "www.example.com",
     "GET /p HTTP/1.1", "WWW.Example.com"),
    ("http10-without-host", "GET", "http://www.example.com:81/p", "HTTP/1.0", None,
     "GET /p HTTP/1.0", "www.example.com:81"),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("method, target, version, host, line, authority",
                         [c[1:] for c in ABSOLUTE], ids=[c[0] for c in ABSOLUTE])
def test_absolute_form_is_forwarded_in_origin_form(recording, stage, method, target, version, host, line,
                                                   authority):
    """An absolute-form target with scheme http or https (any case) is
    routed by its authority and reaches the backend in origin-form: path
    and query only, "/" for an empty path ("*" for OPTIONS with neither
    path nor query). The backend gets the authority exactly as written in
    the target as its only Host (the client's Host is not forwarded), and
    in X-Forwarded-Host and Forwarded. (From stage 09 every request
    reaches the backend as HTTP/1.1, an HTTP/1.0 one too.)"""
    recorder, proxy = recording
    before = len(recorder.received)
    headers = [("Content-Length", "0")] if method == "POST" else []
    r = exchange(proxy.port, http_request(host, method=method, target=target, version=version, headers=headers))
    request_line, kept, added = forwarded_head(recorder, r, before)
    if stage >= 9:
        line = line.replace(" HTTP/1.0", " HTTP/1.1")
    assert request_line == line
    assert kept == [f"Host: {authority}"] + [f"{n}: {v}" for n, v in headers]
    assert added == forwarded_headers(authority, stage, proxy.port)


@pytest.mark.stage(6)
def test_asterisk_form_only_with_options(recording, stage):
    """"OPTIONS *" is forwarded as it is, with its Host; "*" with any
    other method gets rsp's 400 and reaches no backend."""
    recorder, proxy = recording
    before = len(recorder.received)
    r = exchange(proxy.port, http_request(method="OPTIONS", target="*"))
    request_line, kept, added = forwarded_head(recorder, r, before)
    assert request_line == "OPTIONS * HTTP/1.1"
    assert kept == ["Host: www.example.com"]
    assert added == forwarded_headers("www.example.com", stage, proxy.port)
    for method in ("GET", "DELETE", "POST"):
        headers = [("Content-Length", "0")] if method == "POST" else []
        assert_refused(recorder, exchange(proxy.port, http_request(method=method, target="*", headers=headers)),
                       before + 1)


CONNECTS = [
    # (id, target, Host)
    ("authority-form", "www.example.com:443", "www.example.com:443"),
    ("the-backend-itself", None, None),  # the recording backend's own address
    ("origin-form", "/echo", "www.example.com"),
    ("absolute-form", "http://www.example.com/echo", "www.example.com"),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("target, host", [c[1:] for c in CONNECTS], ids=[c[0] for c in CONNECTS])
def test_connect_gets_405(recording, target, host):
    """CONNECT (whatever its target) is no tunnel: rsp answers 405 Method
    Not Allowed itself, with an Allow header listing the methods it does
    take (not CONNECT) and Connection: close; no backend hears of it."""
    recorder, proxy = recording
    if target is None:
        target = host = f"{recorder.host}:{recorder.port}"
    before = len(recorder.received)
    r = exchange(proxy.port, http_request(host, method="CONNECT", target=target))
    assert_refused(recorder, r, before, 405, "Method Not Allowed")
    allowed = [m.strip() for m in (r.header("Allow") or "").split(",")]
    assert "GET" in allowed and all(m.isalpha() and m.isupper() for m in allowed), r.headers
    assert "CONNECT" not in allowed, r.headers


BAD_TARGETS = [
    # (id, target); each with Host: www.example.com
    ("ftp", "ftp://admin.example.com/"),
    ("ftp-upper-case", "FTP://www.example.com/echo"),
    ("ws", "ws://www.example.com/"),
    ("wss", "wss://www.example.com/"),
    ("scheme-only", "xyz:"),
    ("scheme-and-path", "xyz:/a"),
    ("network-path", "//host/p"),
    ("double-slash", "//"),
    ("triple-slash", "///a"),
    ("bare-word", "index.html"),
    ("http-one-slash", "http:/x"),
    ("http-no-slash", "http:x"),
    ("mailto", "mailto:a@b"),
    ("asterisk-with-get", "*"),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("target", [c[1] for c in BAD_TARGETS], ids=[c[0] for c in BAD_TARGETS])
def test_other_target_forms_get_400(recording, target):
    """A target that is neither origin-form, nor absolute-form with http
    or https, nor "*" (with OPTIONS): rsp's 400, and no backend hears of
    it; the next request is served. A target starting with "//" counts as
    a network-path reference (a backend may take what follows for a host),
    not as origin-form."""
    recorder, proxy = recording
    before = len(recorder.received)
    assert_refused(recorder, exchange(proxy.port, http_request(target=target)), before)
    r = exchange(proxy.port, http_request(target="/normal"))
    request_line, _, _ = forwarded_head(recorder, r, before)
    assert request_line == "GET /normal HTTP/1.1"


# -- nginx behind rsp ----------------------------------------------------------------

PUBLIC = b"<!DOCTYPE html>\n<title>public</title><p>Everybody may read this.</p>\n"
SECRET = b"TOP SECRET: the admin password is hunter2\n"


@pytest.fixture(scope="module")
def guarded_nginx(tmp_path_factory):
    """nginx whose default server's root holds index.html and
    admin/secret.txt, and whose virtual host admin.example.com serves
    secret.txt: the secret is meant to stay behind rsp."""
    binary = Nginx.find_binary()
    if binary is None:
        pytest.skip("nginx is not installed (./setup-env.sh installs it)")
    root = tmp_path_factory.mktemp("www")
    (root / "index.html").write_bytes(PUBLIC)
    (root / "admin").mkdir()
    (root / "admin" / "secret.txt").write_bytes(SECRET)
    admin_root = tmp_path_factory.mktemp("admin-site")
    (admin_root / "secret.txt").write_bytes(SECRET)
    for directory in (root, root / "admin", admin_root):
        os.chmod(directory, 0o755)
    server = Nginx(binary, str(root), str(tmp_path_factory.mktemp("nginx")),
                   virtual_hosts={"admin.example.com": str(admin_root)})
    yield server
    server.stop()


def nginx_access_log(server):
    with open(os.path.join(server.workdir, "access.log"), errors="replace") as f:
        return f.read()


def assert_nginx_never_asked_for_the_secret(proxy, server):
    """A last request for the public page, so that once it is in nginx's
    access log, any request before it is there too: none of them asked
    for the secret."""
    marker = f"control-{proxy.port}"
    r = ask(proxy.port, f"/index.html?{marker}")
    assert r.status == 200 and r.body == PUBLIC, r.raw[:300]
    wait_for(lambda: marker in nginx_access_log(server), "nginx logging the control request")
    asked = [line for line in nginx_access_log(server).splitlines() if "secret" in line]
    assert asked == [], "nginx was asked for the secret:\n" + "\n".join(asked)


@pytest.mark.stage(6)
def test_foreign_scheme_cannot_pick_another_virtual_host(guarded_nginx, start_proxy):
    """rsp serves only www.example.com, from nginx, which also has a
    virtual host admin.example.com. nginx takes the host of an
    absolute-form target whatever its scheme, so "GET
    ftp://admin.example.com/secret.txt" with "Host: www.example.com" would
    be the admin site's secret: rsp must answer that 400 itself."""
    proxy = start_proxy(sites={"www.example.com": [guarded_nginx]})
    assert_rsp_page(ask(proxy.port, "/secret.txt", host="admin.example.com"), 421, "Misdirected Request")
    for target in ("ftp://admin.example.com/secret.txt", "FTP://admin.example.com/secret.txt",
                   "ws://admin.example.com/secret.txt", "xyz://admin.example.com/secret.txt",
                   "//admin.example.com/secret.txt"):
        r = ask(proxy.port, target)
        assert SECRET not in r.raw, f"{target} got the secret: {r.raw[:300]!r}"
        assert_rsp_page(r, 400, "Bad Request")
    assert_nginx_never_asked_for_the_secret(proxy, guarded_nginx)


GUARD = """
function route(req)
  if req.path:find("^/admin") then return { status = 403 } end
  return "site"
end
"""


@pytest.mark.stage(7)
def test_encoded_slash_cannot_dodge_a_route_rule(guarded_nginx, start_proxy):
    """route refuses /admin... with a 403; nginx serves admin/secret.txt.
    Other spellings of /admin are normalized before route judges them. An
    escaped slash is no separator for route, but nginx decodes it and then
    removes dot segments: /x/..%2Fadmin/secret.txt would be
    /admin/secret.txt to nginx. rsp answers 400 itself."""
    proxy = start_proxy(pools={"site": [guarded_nginx]}, route=GUARD)
    for target in ("/admin/secret.txt", "/%61dmin/secret.txt", "/x/../admin/secret.txt", "/.//admin//secret.txt"):
        assert_rsp_page(ask(proxy.port, target), 403, "Forbidden")
    for target in ("/x/..%2Fadmin/secret.txt", "/x/..%2fadmin/secret.txt", "/x%2F..%2Fadmin/secret.txt",
                   "/x/..%5Cadmin/secret.txt"):
        r = ask(proxy.port, target)
        assert SECRET not in r.raw, f"{target} got the secret: {r.raw[:300]!r}"
        assert_rsp_page(r, 400, "Bad Request")
    assert_nginx_never_asked_for_the_secret(proxy, guarded_nginx)


ADMIN_PAGE = b"the admin page\n"


def backslash_is_slash(conn, backend):
    """A RawBackend handler that reads a request head, records it, and
    resolves its path as Node's URL parser and IIS do: "\\" is "/", then
    dot segments go. A path under /admin gets ADMIN_PAGE, any other a
    public page."""
    head = read_head(conn)
    backend.record(head)
    target = head.split(b" ")[1].decode("latin-1").partition("?")[0]
    body = ADMIN_PAGE if posixpath.normpath(target.replace("\\", "/")).startswith("/admin") else b"public\n"
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\nX-Backend: backslash\r\n\r\n%s" % (len(body), body))


@pytest.mark.stage(7)
def test_backslash_cannot_dodge_a_route_rule(make_raw_backend, start_proxy):
    """route refuses /admin... with a 403, and the backend reads "\\" as
    "/": /x/..\\admin is /admin to it, while route judged a path below
    /x. A raw backslash in the path is refused as %5C is: rsp's 400, and
    the backend never hears of it."""
    backend = make_raw_backend(backslash_is_slash)
    proxy = start_proxy(pools={"site": [backend]}, route=GUARD)
    assert ask(proxy.port, "/x/y").body == b"public\n"
    assert_rsp_page(ask(proxy.port, "/admin"), 403, "Forbidden")
    for target in ("/x/..\\admin", "/x\\..\\admin/", "http://www.example.com/x/..\\admin?a=1"):
        r = ask(proxy.port, target)
        assert ADMIN_PAGE not in r.raw, f"{target} got the admin page: {r.raw[:300]!r}"
        assert_rsp_page(r, 400, "Bad Request")
    assert backend.connections == 1, f"a refused request reached the backend: {backend.received[1:]!r}"


# -- encoded slashes (stage 07) --------------------------------------------------------

COUNTING = """
local calls = 0
function route(req)
  if req.path == "/calls" then return { status = 200, body = tostring(calls) } end
  calls = calls + 1
  return "app"
end
"""

ENCODED_SLASHES = ["/a%2Fb", "/a%2fb", "/a%5Cb", "/a%5cb", "/x/..%2fadmin", "/%2F", "/a%2F?x=1", "/a/%5C../b",
                   "http://www.example.com/a%2Fb", "/a\\b", "/x/..\\admin", "/\\?x=1", "http://www.example.com/a\\b"]
# (target, request line forwarded)
FINE = [("/search?q=a%2Fb", "/search?q=a%2Fb"), ("/s?p=%5c%2f&q=/", "/s?p=%5c%2f&q=/"),
        ("/a%252Fb", "/a%252Fb"), ("/a?%2F", "/a?%2F"), ("/s?p=a\\b", "/s?p=a\\b")]


@pytest.mark.stage(7)
def test_encoded_slash_in_path_is_refused_before_route(make_raw_backend, start_proxy):
    """%2F, %2f, %5C, %5c or a raw backslash in the path (before "?"):
    rsp's 400, route is not called and no backend hears of it. In the
    query they are fine: forwarded, the query as sent. (%252F is an
    escaped "%", not a slash.)"""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(pools={"app": [recorder]}, route=COUNTING)
    for target in ENCODED_SLASHES:
        assert_refused(recorder, ask(proxy.port, target), 0)
    assert body_of(ask(proxy.port, "/calls")) == "0", "route was called for a refused request"
    for i, (target, forwarded) in enumerate(FINE):
        request_line, _, _ = forwarded_head(recorder, ask(proxy.port, target), i)
        assert request_line == f"GET {forwarded} HTTP/1.1"
    assert body_of(ask(proxy.port, "/calls")) == str(len(FINE))


SHOW_OR_FORWARD = """
function route(req)
  if req.headers["x-show"] then return { status = 200, body = req.path } end
  return "app"
end
"""


@pytest.mark.stage(7)
def test_allow_encoded_slashes(make_raw_backend, start_proxy):
    """allow_encoded_slashes = true: a path with %2F, %5C or a raw
    backslash reaches route and the backend undecoded (hex digits
    upper-cased, as normalization writes every escape it keeps; a
    backslash as it came)."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(pools={"app": [recorder]}, route=SHOW_OR_FORWARD, allow_encoded_slashes=True)
    cases = [("/x/..%2fadmin", "/x/..%2Fadmin", ""), ("/a%5cb?q=%2f", "/a%5Cb", "?q=%2f"),
             ("/a%2Fb", "/a%2Fb", ""), ("/x/..\\admin?q=\\", "/x/..\\admin", "?q=\\")]
    for i, (target, path, query) in enumerate(cases):
        assert body_of(ask(proxy.port, target, headers=[("X-Show", "1")])) == path
        request_line, _, _ = forwarded_head(recorder, ask(proxy.port, target), i)
        assert request_line == f"GET {path}{query} HTTP/1.1"


# -- the backend gets the path route judged (stage 07) -----------------------------------

SHOW_PATH = "function route(req) return { status = 200, body = req.path } end"

JUDGED = [
    # (target, request target the backend must get)
    ("/x/../admin", "/admin"),
    ("/%61dmin?x=%2F", "/admin?x=%2F"),
    ("/a///b/./c", "/a/b/c"),
    ("/.//a", "/a"),
    ("/a/b/..", "/a/"),
    ("/%7Euser", "/~user"),
    ("/%7euser/%41%62%2d%5F%2e%7e", "/~user/Ab-_.~"),
    ("/%e2%82%ac/%3f", "/%E2%82%AC/%3F"),
    ("/%zz/a%4", "/%25zz/a%254"),
    ("/a/%2e%2E/b", "/b"),
    ("/../../a", "/a"),
    ("/a/.b/..c/", "/a/.b/..c/"),
    ("/a%20b", "/a%20b"),
    ("/p?a=%41&b=/../c", "/p?a=%41&b=/../c"),
    ("/p?", "/p?"),
    ("/p?x?y", "/p?x?y"),
    ("/%2e%2e/p?%2e", "/p?%2e"),
    ("http://www.example.com/a/%62/../c?z=1", "/a/c?z=1"),
    ("/", "/"),
]


@pytest.mark.stage(7)
def test_backend_gets_the_path_route_judged(make_raw_backend, start_proxy):
    """The request line the backend gets carries exactly the normalized
    path that route sees as req.path, then "?" and the query as sent if
    the target had a "?": with a route that picks the pool, and with no
    route at all (the default site). Otherwise route would judge one path
    and the backend serve another."""
    judge = start_proxy(route=SHOW_PATH)
    via_route, plain = make_raw_backend(record_request), make_raw_backend(record_request)
    proxies = [(start_proxy(pools={"app": [via_route]}, route='function route(req) return "app" end'), via_route),
               (start_proxy(plain), plain)]
    wrong = []
    for i, (target, expected) in enumerate(JUDGED):
        path = body_of(ask(judge.port, target))
        query = target.partition("?")[1] + target.partition("?")[2]
        if path + query != expected:
            wrong.append((target, "route saw", path))
        for proxy, recorder in proxies:
            request_line, _, _ = forwarded_head(recorder, ask(proxy.port, target), i)
            if request_line != f"GET {path + query} HTTP/1.1":
                wrong.append((target, f"backend of proxy on {proxy.port} got", request_line))
    assert wrong == [], "\n".join(map(repr, wrong))


# -- headers ------------------------------------------------------------------------------

UNDERSCORED = [("X_Real_IP", "6.6.6.6"), ("X_Forwarded_Proto", "https"), ("X_Forwarded_Host", "evil.example"),
               ("My_Header", "v"), ("x_forwarded_for", "7.7.7.7"), ("_", "x")]
PLAIN = [("X-Normal", "1"), ("X-Value-With-Underscore", "a_b")]


@pytest.mark.stage(6)
@pytest.mark.parametrize("allow", [None, False, True], ids=["default", "false", "true"])
def test_header_names_with_underscores(make_raw_backend, start_proxy, stage, allow):
    """A header whose name has "_" (X_Real_IP, which a backend may read as
    X-Real-IP) is not forwarded by default (or with
    allow_underscores_in_headers = false); other headers are, and rsp's
    own X-Real-IP and X-Forwarded-* are not disturbed.
    allow_underscores_in_headers = true forwards them as sent."""
    recorder = make_raw_backend(record_request)
    options = {} if allow is None else {"allow_underscores_in_headers": allow}
    proxy = start_proxy(recorder, **options)
    sent = [PLAIN[0], *UNDERSCORED[:3], PLAIN[1], *UNDERSCORED[3:]]
    _, kept, added = forwarded_head(recorder, exchange(proxy.port, http_request(headers=sent)), 0)
    expected = sent if allow else [h for h in sent if "_" not in h[0]]
    assert kept == ["Host: www.example.com"] + [f"{n}: {v}" for n, v in expected]
    assert added == forwarded_headers("www.example.com", stage, proxy.port)


SPOOFS = [("Forwarded", "for=6.6.6.6;host=admin.example.com;proto=https"), ("forwarded", "for=unknown"),
          ("FORWARDED", "by=x"), ("X-Original-URL", "/admin"), ("x-original-url", "/admin"),
          ("X-Rewrite-URL", "/admin"), ("X-REWRITE-URL", "/admin")]

# (id, Host as sent or None for HTTP/1.0 without one)
FORWARDED_HOSTS = [("token", "www.example.com"), ("with-port", "www.example.com:8080"),
                   ("ipv6-with-port", "[::1]:8080"), ("odd-case", "WWW.Example.com"), ("no-host", None)]


@pytest.mark.stage(6)
@pytest.mark.parametrize("host", [h[1] for h in FORWARDED_HOSTS], ids=[h[0] for h in FORWARDED_HOSTS])
def test_spoofable_headers_dropped_and_one_forwarded_added(recording, stage, host):
    """A client's Forwarded, X-Original-URL and X-Rewrite-URL (any case)
    never reach the backend. rsp adds exactly one Forwarded:
    for=127.0.0.1;proto=http;host=HOST, HOST being the Host as sent (as
    in X-Forwarded-Host), as a quoted-string when it is not a token (a
    port, an IPv6 address); without a Host (HTTP/1.0), no host= (and up
    to stage 08 no Host either; from stage 09, forwarded as HTTP/1.1, an
    empty Host)."""
    recorder, proxy = recording
    before = len(recorder.received)
    version = "HTTP/1.1" if host is not None else "HTTP/1.0"
    sent = [SPOOFS[0], ("X-Normal", "1"), *SPOOFS[1:]]
    r = exchange(proxy.port, http_request(host, version=version, headers=sent))
    _, kept, added = forwarded_head(recorder, r, before)
    no_host = [] if stage <= 8 else ["Host: "]
    assert kept == ([f"Host: {host}"] if host is not None else no_host) + ["X-Normal: 1"]
    assert added == forwarded_headers(host, stage, proxy.port)
    assert [line for line in added if line.lower().startswith("forwarded:")] == [forwarded_line(host)]


# Headers frameworks believe about the scheme, port or path prefix the
# client used: Rack ranks X-Forwarded-Ssl above X-Forwarded-Proto; Django,
# Spring and werkzeug read the port and the prefix.
FORWARDING = [("X-Forwarded-Port", "443"), ("X-Forwarded-Ssl", "on"), ("X-Forwarded-Scheme", "https"),
              ("X-Url-Scheme", "https"), ("Front-End-Https", "on"), ("X-Forwarded-Prefix", "/admin")]


@pytest.mark.stage(6)
def test_client_forwarding_headers_never_reach_the_backend(recording, stage):
    """A client's X-Forwarded-Port, X-Forwarded-Ssl, X-Forwarded-Scheme,
    X-Url-Scheme, Front-End-Https and X-Forwarded-Prefix, each sent three
    times (as written, in odd case, in upper case), never reach the
    backend; it gets exactly one X-Forwarded-Port, set by rsp: the port of
    the listener the client connected to."""
    recorder, proxy = recording
    before = len(recorder.received)
    sent = [h for name, value in FORWARDING for h in [(name, value), (name.swapcase(), value), (name.upper(), value)]]
    r = exchange(proxy.port, http_request(headers=[sent[0], ("X-Normal", "1"), *sent[1:]]))
    _, kept, added = forwarded_head(recorder, r, before)
    assert kept == ["Host: www.example.com", "X-Normal: 1"], f"a client's forwarding header reached the backend: {kept}"
    assert added == forwarded_headers("www.example.com", stage, proxy.port), \
        f"expected rsp's own forwarding headers only, X-Forwarded-Port: {proxy.port} among them: {added}"


@pytest.mark.stage(6)
def test_forwarded_for_an_ipv6_client(make_raw_backend, start_proxy):
    """An IPv6 client (over ::1, to a proxy listening on every address) is
    written for="[::1]" in Forwarded."""
    if not ipv6_loopback_available():
        pytest.skip("no IPv6 loopback here")
    recorder = make_raw_backend(record_request)
    port = free_port()
    proxy = start_proxy(recorder, port=port, listen=port)
    r = exchange(proxy.port, http_request(headers=[("Forwarded", "for=1.2.3.4")]), address="::1")
    _, _, added = forwarded_head(recorder, r, 0)
    assert [line for line in added if line.lower().startswith("forwarded:")] == \
        [forwarded_line("www.example.com", client="::1")], added
    assert 'Forwarded: for="[::1]";proto=http;host=www.example.com' in added


# -- the new settings must be booleans ------------------------------------------------------

@pytest.mark.parametrize("setting", [
    pytest.param("allow_underscores_in_headers", marks=pytest.mark.stage(6)),
    pytest.param("allow_encoded_slashes", marks=pytest.mark.stage(7)),
])
@pytest.mark.parametrize("value", ["yes", 1, "true"])
def test_new_settings_must_be_booleans(rsp, tmp_path, setting, value):
    """allow_underscores_in_headers (stage 06 on) and allow_encoded_slashes
    (stage 07 on) take true or false; anything else is a config error:
    rsp exits non-zero, naming the file and the setting in quotes."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [("127.0.0.1", 1)], str(tmp_path), {setting: value})
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, setting, status=None)
