"""rsp speaks HTTP (stage 06 on): it parses each request head itself,
routes it by Host to a site, refuses what it cannot read safely with its
own 400/414/421/431/505, forwards the body exactly as framed and nothing
after it, and writes a fresh head for the backend (hop-by-hop headers
dropped, X-Forwarded-* and X-Real-IP set).

What the backend received is read byte for byte from a raw recording
backend (backends.record_request); which site served a request from the
test backends' names. Waiting is a bounded poll; no timing is asserted."""

import functools
import random
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends import (HTTPBackend, RawBackend, close_at_once, read_head, read_head_then_close, record_request,
                      wait_for_eof)
from checks import assert_rsp_page
from client import Conn, connect, exchange, read_response
import netutil
from netutil import free_port, ipv6_loopback_available
from pattern import assert_same_bytes, pattern
from proxy import Proxy, backend_address, large_bodies, proxy_arguments

MiB = 1024 * 1024
POLL_TIMEOUT = 10.0  # a bound on waiting for something that must happen, not a measurement

REASONS = {
    400: "Bad Request",
    414: "URI Too Long",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    505: "HTTP Version Not Supported",
}

# The headers rsp sets itself on every request it forwards.
ADDED = ("x-forwarded-for", "x-real-ip", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "forwarded",
         "connection")

# The characters of an RFC 9110 token (anything else makes a Forwarded
# parameter value a quoted-string).
TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


# -- helpers -------------------------------------------------------------------

def http_request(host="www.example.com", method="GET", target="/echo", version="HTTP/1.1",
                 headers=(), body=b"", close=True):
    """Request bytes exactly as given: a Host header unless host is None,
    then `headers` (pairs, or whole lines as bytes), then `Connection:
    close` unless close=False, then body (no Content-Length is added).

    From stage 09 a client connection stays open after a response unless
    the request says `Connection: close`, so a client that reads to EOF
    needs it; it is valid at every stage, and no backend sees it (it is
    hop-by-hop)."""
    lines = [f"{method} {target} {version}".encode("latin-1")]
    if host is not None:
        lines.append(b"Host: " + host.encode("latin-1"))
    for h in headers:
        lines.append(h if isinstance(h, bytes) else f"{h[0]}: {h[1]}".encode("latin-1"))
    if close:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def served_by(r):
    """The name of the test backend that answered; fails on anything but a 200."""
    assert r.status == 200, f"expected a 200 from a backend, got {r!r}: {r.raw[:300]!r}"
    return r.json()["backend"]


def assert_rsp_answer(r, status):
    """r is rsp's own error page for `status` (checks.assert_rsp_page),
    with the reason phrase of REASONS."""
    assert_rsp_page(r, status, REASONS[status])


wait_for = functools.partial(netutil.wait_for, timeout=POLL_TIMEOUT)


def recorded(backend, count=1, before=0):
    """The byte streams the recording backend received on its connections
    after the first `before`, once `count` more of them have ended."""
    wait_for(lambda: len(backend.received) >= before + count,
             f"{count} connection(s) to the recording backend ended")
    streams = backend.received[before:]
    assert len(streams) == count, f"{len(streams)} connections recorded, expected {count}"
    return streams


def split_forwarded(stream):
    """(request line, header lines, everything after the head) of what a
    backend received; checks that every line of the head ends in CRLF."""
    head, sep, rest = stream.partition(b"\r\n\r\n")
    assert sep, f"no complete head in what the backend received: {stream[:500]!r}"
    lines = head.decode("latin-1").split("\r\n")
    assert not any("\r" in line or "\n" in line for line in lines), head
    return lines[0], lines[1:], rest


def dechunked(body):
    """The data of a chunked body, without its framing (sizes,
    extensions, trailer)."""
    out, pos = [], 0
    while True:
        line_end = body.index(b"\r\n", pos)
        size = int(body[pos:line_end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[line_end + 2:line_end + 2 + size])
        pos = line_end + 2 + size + 2


def as_forwarded(stage, headers, body):
    """(header lines, body) a backend gets for a request with these
    headers (name, value pairs) and this body: as sent up to stage 16;
    from stage 17 the body is read whole first, and a chunked one arrives
    without its framing, with a Content-Length in Transfer-Encoding's
    place (chapter 17)."""
    chunked = any(n.lower() == "transfer-encoding" for n, _ in headers)
    if stage < 17 or not chunked:
        return [f"{n}: {v}" for n, v in headers], body
    data = dechunked(body)
    return [f"Content-Length: {len(data)}" if n.lower() == "transfer-encoding" else f"{n}: {v}"
            for n, v in headers], data


def kept_and_added(header_lines):
    """Splits forwarded header lines into the client's (in order) and the
    ones rsp adds (as a sorted list)."""
    kept = [line for line in header_lines if line.split(":")[0].lower() not in ADDED]
    added = sorted(line for line in header_lines if line.split(":")[0].lower() in ADDED)
    return kept, added


def forwarded_value(text):
    """A Forwarded (RFC 7239) parameter value: text itself if it is a
    token, else a quoted-string."""
    if text and all(c in TOKEN_CHARS for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def forwarded_line(host, client="127.0.0.1"):
    """The Forwarded header rsp adds to a request from `client` with Host
    `host` as sent (None: no Host): for=, proto=http and host=."""
    node = f"[{client}]" if ":" in client else client
    line = f"Forwarded: for={forwarded_value(node)};proto=http"
    if host is not None:
        line += f";host={forwarded_value(host)}"
    return line


def forwarded_headers(host, stage, port, xff="127.0.0.1"):
    """The sorted header lines rsp adds to a request from 127.0.0.1 to its
    listener on `port` on stage `stage`: up to stage 08 also Connection:
    close (one request per backend connection); from stage 09 none, as
    rsp keeps backend connections for the next request (backend_keepalive,
    default 32)."""
    lines = [f"X-Forwarded-For: {xff}", "X-Real-IP: 127.0.0.1", "X-Forwarded-Proto: http",
             f"X-Forwarded-Port: {port}", forwarded_line(host)]
    if stage <= 8:
        lines.append("Connection: close")
    if host is not None:
        lines.append(f"X-Forwarded-Host: {host}")
    return sorted(lines)


class Shared:
    """Backends and proxies that live for a whole module, for tables of
    cases that each need only a request or two (starting a proxy per case
    would cost more than the case). At the end the proxies get the same
    check as start_proxy's (running, no crash, no fd leaked)."""

    def __init__(self, rsp, workdir):
        self.rsp, self.workdir = rsp, workdir
        self.backends, self.proxies = [], []

    def backend(self, name):
        self.backends.append(HTTPBackend(name))
        return self.backends[-1]

    def raw_backend(self, handle):
        self.backends.append(RawBackend(handle))
        return self.backends[-1]

    def proxy(self, *backends, **options):
        port = free_port()
        args = proxy_arguments(self.rsp.stage, port, [backend_address(b) for b in backends], self.workdir,
                               options)
        self.proxies.append(Proxy(self.rsp.binary, args, port, self.workdir))
        return self.proxies[-1]

    def close(self):
        problems = []
        for proxy in self.proxies:
            problems += proxy.check_and_stop()
        for backend in self.backends:
            backend.stop()
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def shared(rsp, tmp_path_factory):
    things = Shared(rsp, str(tmp_path_factory.mktemp("shared")))
    yield things
    things.close()


# -- virtual hosts ---------------------------------------------------------------

SITE_NAMES = ("www", "wild", "eu", "default")


def sites_setting(backends):
    """Sites www.example.com, *.example.com and *.eu.example.com."""
    return {
        "www.example.com": [backends["www"]],
        "*.example.com": [backends["wild"]],
        "*.eu.example.com": [backends["eu"]],
    }


@pytest.fixture
def site_backends(make_backend):
    """Four HTTP test backends, one per site, named after it."""
    return {name: make_backend(name) for name in SITE_NAMES}


def start_sites_proxy(start_proxy, backends, default=True):
    """A proxy with the sites of sites_setting() and (if default) a
    default site."""
    return start_proxy(*([backends["default"]] if default else []), sites=sites_setting(backends))


@pytest.fixture(scope="module")
def vhosts(shared):
    """(backends by site name, proxy with a default site, proxy without),
    shared by the cases of a table."""
    backends = {name: shared.backend(name) for name in SITE_NAMES}
    with_default = shared.proxy(backends["default"], sites=sites_setting(backends))
    without_default = shared.proxy(sites=sites_setting(backends))
    return backends, with_default, without_default


def hits(backends):
    return {name: b.total_hits for name, b in backends.items()}


ROUTES = [
    # (id, Host as sent, site expected)
    ("exact-beats-wildcard", "www.example.com", "www"),
    ("wildcard", "shop.example.com", "wild"),
    ("default", "example.org", "default"),
    ("wildcard-multi-level", "a.b.example.com", "wild"),
    ("wildcard-not-the-domain-itself", "example.com", "default"),
    ("wildcard-needs-the-dot", "badexample.com", "default"),
    ("suffix-only", "www.example.com.evil.org", "default"),
    ("longest-wildcard-wins", "paris.eu.example.com", "eu"),
    ("longest-wildcard-multi-level", "a.paris.eu.example.com", "eu"),
    ("shorter-wildcard-for-its-domain", "eu.example.com", "wild"),
    ("odd-case-exact", "WWW.Example.COM", "www"),
    ("odd-case-wildcard", "Shop.EXAMPLE.com", "wild"),
    ("port-exact", "www.example.com:8080", "www"),
    ("port-wildcard", "shop.example.com:80", "wild"),
    ("port-and-odd-case", "wWw.eXample.cOm:8000", "www"),
    ("trailing-dot-exact", "www.example.com.", "www"),
    ("trailing-dot-wildcard-with-port", "Shop.Example.Com.:8080", "wild"),
    ("ipv4-address", "127.0.0.1", "default"),
    ("ipv6-address-with-port", "[::1]:8080", "default"),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("host, site", [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES])
def test_host_routing(vhosts, host, site):
    """Each request goes to the site its Host names: exact names first,
    else the longest matching "*." wildcard (any depth below it, but not
    the domain itself), else the default site. Case, a port and a
    trailing dot do not matter. Only that site's backend sees the request,
    with the Host as sent. Without a default site, the same Host gets the
    same site, or rsp's 421 where the default site would have served."""
    backends, with_default, without_default = vhosts
    for proxy in (with_default, without_default):
        before = hits(backends)
        r = exchange(proxy.port, http_request(host, target=f"/echo?host={host}"))
        if site == "default" and proxy is without_default:
            assert_rsp_answer(r, 421)
            assert hits(backends) == before
            continue
        assert served_by(r) == site
        seen = r.json()
        assert seen["path"] == f"/echo?host={host}"
        assert ["Host", host] in seen["headers"]
        assert hits(backends) == {name: n + (name == site) for name, n in before.items()}


@pytest.mark.stage(6)
def test_three_sites_one_proxy(site_backends, start_proxy):
    """One proxy serves its sites side by side: requests for the exact
    site, a wildcard site and unknown hosts, interleaved, each reach their
    own site's backend."""
    proxy = start_sites_proxy(start_proxy, site_backends)
    hosts = ["www.example.com", "blog.example.com", "example.net", "x.eu.example.com"] * 3
    seen = [served_by(exchange(proxy.port, http_request(h))) for h in hosts]
    assert seen == ["www", "wild", "default", "eu"] * 3
    assert [b.total_hits for b in site_backends.values()] == [3, 3, 3, 3]


@pytest.mark.stage(6)
def test_unknown_host_without_default_site_gets_421(site_backends, start_proxy):
    """Without a default site, a Host that matches no site gets rsp's own
    421 Misdirected Request (a short HTML page), no backend sees it, and
    the sites are still served."""
    proxy = start_sites_proxy(start_proxy, site_backends, default=False)
    for host in ("example.org", "example.com", "www.example.com.evil.org"):
        assert_rsp_answer(exchange(proxy.port, http_request(host)), 421)
    assert sum(b.total_hits for b in site_backends.values()) == 0
    assert served_by(exchange(proxy.port, http_request("www.example.com"))) == "www"
    assert served_by(exchange(proxy.port, http_request("a.example.com"))) == "wild"


@pytest.mark.stage(6)
def test_head_request_gets_error_without_content(make_raw_backend, start_proxy):
    """rsp's own answer to a HEAD request (421 for an unknown host, 502
    for a backend that closes without answering) has the status line and
    headers but no content: RFC 9110, section 9.3.2, says a server MUST
    NOT send content in a response to HEAD."""
    silent = make_raw_backend(close_at_once)
    proxy = start_proxy(sites={"silent.example.com": [silent]})
    for host, status in (("nobody.example.org", 421), ("silent.example.com", 502)):
        r = exchange(proxy.port, http_request(host, method="HEAD"))
        assert r.raw.startswith(f"HTTP/1.1 {status} {REASONS[status]}\r\n".encode()), r.raw[:300]
        assert r.header("Connection") == "close", r.headers
        assert r.body == b"", f"{len(r.body)} bytes of content in the answer to HEAD: {r.body[:100]!r}"
        assert not r.reset


@pytest.mark.stage(6)
def test_http10_without_host(vhosts, stage):
    """An HTTP/1.0 request may come without Host: it goes to the default
    site (and gets rsp's 421 when there is no default site), up to stage
    08 as HTTP/1.0 without a Host; from stage 09 rsp speaks HTTP/1.1 to
    every backend, and HTTP/1.1 requires a Host, so it gets an empty one.
    One with a Host is routed by it like any other."""
    backends, with_default, without_default = vhosts
    r = exchange(with_default.port, http_request(None, target="/echo?v=1.0", version="HTTP/1.0"))
    assert served_by(r) == "default"
    assert r.json()["path"] == "/echo?v=1.0"
    host_headers = [h for h in r.json()["headers"] if h[0].lower() == "host"]
    assert host_headers == ([] if stage <= 8 else [["Host", ""]])
    before = hits(backends)
    assert_rsp_answer(exchange(without_default.port, http_request(None, version="HTTP/1.0")), 421)
    assert hits(backends) == before
    for proxy in (with_default, without_default):
        assert served_by(exchange(proxy.port, http_request("www.example.com", version="HTTP/1.0"))) == "www"


@pytest.mark.stage(6)
def test_absolute_form_target(vhosts):
    """A target in absolute form ("http://host/path") names the site: it
    is routed by that host (also without a Host header in HTTP/1.0), a
    Host that agrees with it (case and port aside) is fine, one that
    names another host, or a target whose host is empty or carries user
    info, gets rsp's 400."""
    backends, proxy, _ = vhosts
    cases = [
        (http_request("www.example.com", target="http://www.example.com/echo?a=1"), "www"),
        (http_request("Shop.Example.com:8080", target="http://shop.example.com:8080/echo"), "wild"),
        (http_request(None, target="http://x.eu.example.com/echo", version="HTTP/1.0"), "eu"),
        (http_request("www.example.com", target="http://shop.example.com/echo"), 400),
        (http_request("www.example.com", target="http:///echo"), 400),
        (http_request("www.example.com", target="http://user@www.example.com/echo"), 400),
    ]
    for data, expected in cases:
        before = hits(backends)
        r = exchange(proxy.port, data)
        if expected == 400:
            assert_rsp_answer(r, 400)
            assert hits(backends) == before, data
        else:
            assert served_by(r) == expected, data


# -- incremental parsing ------------------------------------------------------------

@pytest.mark.stage(6)
def test_head_one_byte_at_a_time_is_routed(make_backend, make_raw_backend, start_proxy, stage):
    """A request head that arrives one byte per segment is parsed as it
    comes and routed by its Host (a wildcard site here): the backend gets
    the request line and headers exactly, and only that site's backend
    is contacted."""
    other = make_backend("other")
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(other, sites={"www.example.com": [other], "*.example.com": [recorder]})
    headers = [("User-Agent", "one byte at a time"), ("Accept", "*/*"), ("X-Token", "drip-1234")]
    r = exchange(proxy.port, http_request("Drip.Example.com:8000", target="/slowly?x=1", headers=headers),
                 byte_by_byte=True)
    assert r.status == 200 and r.header("X-Backend") == "recorder", f"{r!r} {r.raw[:300]!r}"
    (stream,) = recorded(recorder)
    request_line, header_lines, rest = split_forwarded(stream)
    assert request_line == "GET /slowly?x=1 HTTP/1.1"
    kept, added = kept_and_added(header_lines)
    assert kept == ["Host: Drip.Example.com:8000"] + [f"{n}: {v}" for n, v in headers]
    assert added == forwarded_headers("Drip.Example.com:8000", stage, proxy.port)
    assert rest == b""
    assert other.total_hits == 0


@pytest.mark.stage(6)
def test_chunked_body_one_byte_at_a_time(make_raw_backend, start_proxy, stage):
    """A whole chunked request, head and body, sent one byte per segment:
    the body framer resumes after every byte, and the backend receives
    the body (extensions and trailer included) exactly; from stage 17 its
    data exactly, read whole and sent with a Content-Length."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    body = b"5\r\nhello\r\n7;note=yes\r\n, world\r\n0\r\nX-Checksum: 42\r\n\r\n"
    r = exchange(proxy.port, http_request(method="POST", target="/upload",
                                          headers=[("Transfer-Encoding", "chunked")], body=body), byte_by_byte=True)
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    _, _, rest = split_forwarded(recorded(recorder)[0])
    assert rest == as_forwarded(stage, [("Transfer-Encoding", "chunked")], body)[1]


# -- the head the backend receives -----------------------------------------------------

@pytest.mark.stage(6)
def test_headers_forwarded_intact_with_forwarded_headers(make_raw_backend, start_proxy, stage):
    """The backend gets the client's request line and headers, names and
    values as sent (blanks around a value trimmed), in their order; the
    hop-by-hop ones (Connection, Keep-Alive, Proxy-Connection, TE,
    Upgrade, and what Connection lists) are gone, and so is a client's
    Forwarded. rsp adds one X-Forwarded-For (the client's chain with the
    client's address appended), and sets X-Real-IP, X-Forwarded-Proto,
    X-Forwarded-Host (the Host as sent), X-Forwarded-Port (the listener's)
    and Forwarded whatever the client said, and (up to stage 08) Connection: close. From stage 07 on the path
    in the request line is the normalized one route judges (%7E is ~), the
    query as sent."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    sent = [
        ("User-Agent", "rsp-fts/1.0 (test)"),
        ("X-Forwarded-For", "1.2.3.4, 5.6.7.8"),
        b"Accept: \t */*  ",
        ("X-Real-IP", "10.9.8.7"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "attacker.example"),
        ("Forwarded", "for=6.6.6.6;host=attacker.example"),
        ("Connection", " ,keep-alive , X-Hop-Custom,"),
        ("x-hop-custom", "for rsp only"),
        ("Keep-Alive", "timeout=5"),
        ("PROXY-CONNECTION", "keep-alive"),
        ("te", "trailers"),
        ("connection", "X-Second-Hop"),
        ("X-Second-Hop", "also for rsp only"),
        ("Upgrade", "websocket"),
        ("x-lower-case", "MiXeD Value"),
        ("Cookie", 'a=b; c="d e"'),
        ("X-Dup", "one"),
        ("X-Dup", "two"),
        ("X-Utf8", "caf\xc3\xa9"),
    ]
    r = exchange(proxy.port, http_request("WWW.example.com:8080", target="/path/%7Ea?q=1&r=%20",
                                          headers=sent))
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    request_line, header_lines, rest = split_forwarded(recorded(recorder)[0])
    path = "/path/%7Ea" if stage < 7 else "/path/~a"
    assert request_line == f"GET {path}?q=1&r=%20 HTTP/1.1"
    kept, added = kept_and_added(header_lines)
    assert kept == [
        "Host: WWW.example.com:8080",
        "User-Agent: rsp-fts/1.0 (test)",
        "Accept: */*",
        "x-lower-case: MiXeD Value",
        'Cookie: a=b; c="d e"',
        "X-Dup: one",
        "X-Dup: two",
        "X-Utf8: caf\xc3\xa9",
    ]
    assert added == forwarded_headers("WWW.example.com:8080", stage, proxy.port, xff="1.2.3.4, 5.6.7.8, 127.0.0.1")
    assert rest == b""


@pytest.mark.stage(6)
@pytest.mark.parametrize("client_values, expected", [
    ([], "127.0.0.1"),
    ([""], "127.0.0.1"),
    (["203.0.113.7"], "203.0.113.7, 127.0.0.1"),
    (["1.2.3.4", "5.6.7.8, 9.9.9.9"], "1.2.3.4, 5.6.7.8, 9.9.9.9, 127.0.0.1"),
], ids=["none", "empty", "one", "two-headers"])
def test_x_forwarded_for_chain(make_raw_backend, start_proxy, client_values, expected):
    """X-Forwarded-For reaches the backend as one header: whatever chain
    the client sent (several headers joined in order), then the client's
    address."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    r = exchange(proxy.port, http_request(headers=[("X-Forwarded-For", v) for v in client_values]))
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    _, header_lines, _ = split_forwarded(recorded(recorder)[0])
    assert [h for h in header_lines if h.lower().startswith("x-forwarded-for:")] == \
        [f"X-Forwarded-For: {expected}"]


@pytest.mark.stage(6)
def test_client_address_on_dual_stack_socket(make_raw_backend, start_proxy):
    """Listening on every address (one dual-stack socket), rsp reports an
    IPv4 client as a.b.c.d (not ::ffff:a.b.c.d) in X-Forwarded-For and
    X-Real-IP, and an IPv6 client (where there is IPv6) as its address."""
    recorder = make_raw_backend(record_request)
    port = free_port()
    proxy = start_proxy(recorder, port=port, listen=port)
    clients = ["127.0.0.1"] + (["::1"] if ipv6_loopback_available() else [])
    for i, address in enumerate(clients):
        r = exchange(proxy.port, http_request(), address=address)
        assert r.status == 200, r.raw[:300]
        (stream,) = recorded(recorder, before=i)
        _, header_lines, _ = split_forwarded(stream)
        _, added = kept_and_added(header_lines)
        assert f"X-Forwarded-For: {address}" in added and f"X-Real-IP: {address}" in added, added


@pytest.mark.stage(6)
def test_connection_cannot_remove_framing_or_host(make_raw_backend, start_proxy):
    """Connection may not make Host, Content-Length or Transfer-Encoding
    hop-by-hop: listed there, they still reach the backend, and so does
    the body they frame."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    body = b"0123456789"
    r = exchange(proxy.port, http_request(method="POST", headers=[
        ("Connection", "Host, Content-Length, Transfer-Encoding, X-Gone"),
        ("Content-Length", str(len(body))), ("X-Gone", "1"), ("X-Stays", "2")], body=body))
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    _, header_lines, rest = split_forwarded(recorded(recorder)[0])
    kept, _ = kept_and_added(header_lines)
    assert kept == ["Host: www.example.com", "Content-Length: 10", "X-Stays: 2"]
    assert rest == body


@pytest.mark.stage(6)
def test_bare_lf_line_ends_are_forwarded_as_crlf(make_raw_backend, start_proxy, stage):
    """Empty lines before the request line are skipped and a bare LF may
    end a line; the backend gets the head rewritten with CRLF everywhere."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    r = exchange(proxy.port, b"\r\n\nGET /lf HTTP/1.1\nHost: www.example.com\nX-A: 1\r\nX-B: 2\nConnection: close\n\n")
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    request_line, header_lines, rest = split_forwarded(recorded(recorder)[0])
    assert request_line == "GET /lf HTTP/1.1"
    assert kept_and_added(header_lines) == (["Host: www.example.com", "X-A: 1", "X-B: 2"],
                                            forwarded_headers("www.example.com", stage, proxy.port))
    assert rest == b""


@pytest.mark.stage(6)
@pytest.mark.parametrize("cut", ["head", "content-length-body", "chunked-body"])
def test_request_cut_short_by_client_eof(make_raw_backend, start_proxy, stage, cut):
    """A client that half-closes before its request is complete (in the
    head, or in a body framed by Content-Length or chunked) gets rsp's
    400, and the backend never gets more than what was sent; from stage
    17, which reads a body whole before choosing a backend, nothing."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    if cut == "head":
        data = b"GET / HTTP/1.1\r\nHost: www.example.com\r\nX-Unfinished: "
    elif cut == "content-length-body":
        data = http_request(method="POST", headers=[("Content-Length", "100")], body=b"only fifty bytes" * 3)
    else:
        data = http_request(method="POST", headers=[("Transfer-Encoding", "chunked")], body=b"5\r\nhello\r\n")
    with connect(proxy.port) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        r = read_response(sock)
    assert_rsp_answer(r, 400)
    if cut == "head" or stage >= 17:
        assert recorder.connections == 0
    else:
        _, _, rest = split_forwarded(recorded(recorder)[0])
        assert data.endswith(rest), rest


def answer_early(conn, backend, piece=65536, pause=0.0):
    """Reads the request head, answers 413 at once without reading the
    body, half-closes, then reads (and drops) whatever comes until EOF,
    `piece` bytes at a time with `pause` seconds after each, counting it
    (a polite early answer: no reset). Records (the head, how many bytes
    came after it)."""
    data = read_head(conn)
    if b"\r\n\r\n" not in data:
        return
    body = b"too large\n"
    conn.sendall(b"HTTP/1.0 413 Payload Too Large\r\nContent-Length: %d\r\nX-Backend: early\r\n\r\n%s"
                 % (len(body), body))
    conn.shutdown(socket.SHUT_WR)
    head_length = data.index(b"\r\n\r\n") + 4
    after_head = len(data) - head_length
    while True:
        chunk = conn.recv(piece)
        if not chunk:
            break
        after_head += len(chunk)
        time.sleep(pause)
    backend.record((data[:head_length], after_head))


def answer_early_read_slowly(conn, backend):
    """answer_early, then reading 4 KiB a millisecond."""
    answer_early(conn, backend, piece=4096, pause=0.001)


@pytest.mark.stage(6)
@pytest.mark.parametrize("handler, size, sockopts", [
    (answer_early, 8 * MiB, {}),
    # Small buffers on both sides of rsp's backend connection: when the
    # client's last byte arrives, rsp still has part of the body queued.
    (answer_early_read_slowly, MiB, {"receive_buffer": 4096, "max_segment": 1000}),
], ids=["reads-fast", "reads-slowly"])
def test_backend_answers_before_reading_the_body(make_raw_backend, start_proxy, stage, handler, size, sockopts):
    """A backend that answers 413 as soon as it has the head, before
    reading a body of megabytes, and closes politely: the client, which
    sends its whole body before reading, gets that 413, not a 502 or a
    reset; the body still flows to the backend up to its end, and no
    further. Also when the backend reads slowly, so that rsp holds the
    end of the body in its queue when the request is complete: that part
    is written out, not dropped with the connection."""
    early = make_raw_backend(handler, **sockopts)
    proxy = start_proxy(early, **large_bodies(stage))
    body = pattern(size)
    data = http_request(method="POST", target="/upload", headers=[("Content-Length", str(len(body)))], body=body)
    r = exchange(proxy.port, data + b"GET /pipelined HTTP/1.1\r\n\r\n")
    assert r.status == 413 and r.body == b"too large\n", f"{r!r} {r.raw[:300]!r}"
    assert not r.reset
    ((head, after_head),) = recorded(early)
    assert head.startswith(b"POST /upload HTTP/1.1\r\n")
    assert after_head == len(body), f"the backend got {after_head} bytes after the head, the body has {len(body)}"


# -- bodies -------------------------------------------------------------------------

def chunked(data, rng, sizes=(1, 4096, 200_000)):
    """data in the chunked coding, in chunks of random sizes up to
    max(sizes), with sizes in mixed-case hex, some with extensions, and a
    trailer field at the end."""
    out, pos, i = [], 0, 0
    while pos < len(data):
        n = min(rng.randint(1, rng.choice(sizes)), len(data) - pos)
        size = f"{n:x}" if i % 2 else f"{n:X}"
        ext = f";i={i}" if i % 3 == 0 else ""
        out.append(f"{size}{ext}\r\n".encode() + data[pos:pos + n] + b"\r\n")
        pos += n
        i += 1
    out.append(b"0\r\nX-Trailer: done\r\n\r\n")
    return b"".join(out)


BODIES = [
    # (id, headers, body as sent)
    ("content-length", [("Content-Length", "12")], b"hello world!"),
    ("content-length-zero", [("Content-Length", "0")], b""),
    ("content-length-identical-twice", [("Content-Length", "5"), ("Content-Length", "5")], b"hello"),
    ("chunked-extensions-trailer", [("Transfer-Encoding", "chunked"), ("Trailer", "X-Checksum")],
     b"5\r\nhello\r\n7;note=yes\r\n, world\r\n0\r\nX-Checksum: 42\r\n\r\n"),
    ("chunked-empty", [("Transfer-Encoding", "chunked")], b"0\r\n\r\n"),
    ("chunked-trailers", [("Transfer-Encoding", "chunked")],  # every tchar in a name, blanks and 8-bit in values
     b"2\r\nhi\r\n0\r\nX-A!#$%&'*+.^_`|~: v\r\nX-Empty:\r\nX-Tab:\tone two\t\r\nX-Utf8: \xc3\xa9\r\n"
     + b"".join(b"X-T%d: %d\r\n" % (i, i) for i in range(96)) + b"\r\n"),
    ("chunked-binary", [("Transfer-Encoding", "chunked")],  # data that looks like framing, NULs, CRs
     b"A\r\n" + b"\r\n0\r\n\r\n\x00\xff!" + b"\r\n" + b"a;x=\"y\";z\r\n" + bytes(range(10)) + b"\r\n"
     + b"3\r\n\r\r\r\r\n0\r\n\r\n"),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("headers, body", [b[1:] for b in BODIES], ids=[b[0] for b in BODIES])
def test_post_body_byte_exact(make_raw_backend, start_proxy, stage, headers, body):
    """A body framed by Content-Length or chunked (with extensions and a
    trailer) reaches the backend byte for byte, framing included, with
    its framing header, and nothing follows it. (Identical Content-Length
    headers are accepted and sent on once.) From stage 09 the Trailer
    header is hop-by-hop and not forwarded; the trailer fields still are,
    as part of the chunked body. From stage 17 a chunked body is read
    whole and arrives as its data alone, with a Content-Length in the
    place of Transfer-Encoding (as_forwarded)."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    r = exchange(proxy.port, http_request(method="POST", target="/upload", headers=headers, body=body))
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    _, header_lines, rest = split_forwarded(recorded(recorder)[0])
    kept, _ = kept_and_added(header_lines)
    dropped = ("trailer",) if stage >= 9 else ()
    lines, expected = as_forwarded(stage, [(n, v) for n, v in dict(headers).items()
                                           if n.lower() not in dropped], body)
    assert kept == ["Host: www.example.com"] + lines
    assert rest == expected


@pytest.mark.stage(6)
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_large_upload_byte_exact(make_raw_backend, start_proxy, stage, framing):
    """An 8 MiB upload, framed by Content-Length or chunked in chunks of
    random sizes, reaches the backend byte for byte, and nothing after it
    (from stage 17 a chunked one as its data alone: as_forwarded)."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder, **large_bodies(stage))
    data = pattern(8 * MiB, offset=5)
    if framing == "chunked":
        body, headers = chunked(data, random.Random(6)), [("Transfer-Encoding", "chunked")]
    else:
        body, headers = data, [("Content-Length", str(len(data)))]
    r = exchange(proxy.port, http_request(method="PUT", target="/big", headers=headers, body=body))
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    _, expected = as_forwarded(stage, headers, body)
    assert r.json()["body_length"] == len(expected)
    _, _, rest = split_forwarded(recorded(recorder)[0])
    assert_same_bytes(rest, expected, "the body the backend received")


PIPELINED = [
    # (id, headers, body) of the first request
    ("get", [], b""),
    ("content-length", [("Content-Length", "5")], b"hello"),
    ("chunked", [("Transfer-Encoding", "chunked")], b"5\r\nhello\r\n0\r\n\r\n"),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("headers, body", [p[1:] for p in PIPELINED], ids=[p[0] for p in PIPELINED])
def test_pipelined_bytes_not_forwarded(make_raw_backend, start_proxy, stage, headers, body):
    """A second request sent right behind the first, in the same write, is
    not forwarded: the backend sees exactly one request, and nothing after
    its body; the client gets one answer and the connection closes. (Up to
    stage 08 a connection carries one request whatever it says; from
    stage 09 because the first says Connection: close: see the next test.)"""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    first = http_request(method="POST" if body else "GET", target="/first", headers=headers, body=body)
    second = http_request(target="/second") + b"GARBAGE\r\n\r\n"
    r = exchange(proxy.port, first + second)
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    assert int(r.header("Content-Length")) == len(r.body), "more than the one answer came back"
    (stream,) = recorded(recorder)
    request_line, _, rest = split_forwarded(stream)
    assert request_line.split()[1] == "/first"
    _, body = as_forwarded(stage, headers, body)
    assert rest == body, f"after the body the backend also got {rest[len(body):][:200]!r}"
    assert recorder.connections == 1


@pytest.mark.stage(9)
@pytest.mark.parametrize("headers, body", [p[1:] for p in PIPELINED], ids=[p[0] for p in PIPELINED])
def test_pipelined_requests_forwarded_one_at_a_time(make_raw_backend, start_proxy, stage, headers, body):
    """Stage 09: the same bytes, but neither request says Connection:
    close. Both are answered, in order; the recording backend answers
    HTTP/1.0 and closes, so each goes on a backend connection of its own,
    which gets exactly that request and nothing after its body. The
    garbage behind them gets rsp's 400, the connection closes, and no
    backend sees a byte of it."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    first = http_request(method="POST" if body else "GET", target="/first", headers=headers, body=body,
                         close=False)
    second = http_request(target="/second", close=False)
    with Conn(proxy.port) as conn:
        conn.send(first + second + b"GARBAGE\r\n\r\n")
        answers = [conn.read_response() for _ in range(3)]
        assert conn.closed(), "the connection stayed open after the 400"
    for r, path in zip(answers, ("/first", "/second")):
        assert r.status == 200 and r.header("X-Backend") == "recorder", f"{r!r} {r.raw[:300]!r}"
        assert r.json()["head"].split(" ")[1] == path, f"the answer to {path} came out of order: {r.raw[:300]!r}"
    assert_rsp_answer(answers[2], 400)
    forwarded = sorted((line.split()[1], rest) for line, _, rest in map(split_forwarded, recorded(recorder, 2)))
    assert forwarded == [("/first", as_forwarded(stage, headers, body)[1]), ("/second", b"")]
    assert recorder.connections == 2


# -- what rsp refuses ------------------------------------------------------------------

H = b"Host: www.example.com\r\n"
CLOSE = b"Connection: close\r\n"  # from stage 09 a connection stays open without it
FILLER = b"b" * 8000


def head_with(*lines, request_line=b"GET /echo HTTP/1.1"):
    """A request head: the request line, Host, the given header lines."""
    return request_line + b"\r\n" + H + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


@pytest.fixture(scope="module")
def refusing(shared):
    """(a recording backend, a proxy in front of it), shared by the cases
    of the table below."""
    recorder = shared.raw_backend(record_request)
    return recorder, shared.proxy(recorder)


CHUNKED = head_with(b"Transfer-Encoding: chunked", request_line=b"POST / HTTP/1.1")

# (id, bytes sent, status, how much of the body may reach the backend: None
# if nothing may, else the offset of the first bad byte in the body, as the
# head and the body before the bad chunk may have been forwarded already)
REFUSED = [
    ("endless-request-line", b"GET /" + b"a" * 100_000, 414, None),
    ("endless-header-line", b"GET / HTTP/1.1\r\n" + H + b"X-Long: " + b"b" * 100_000, 431, None),
    ("head-over-32k", head_with(*(b"X-Fill-%d: %s" % (i, FILLER) for i in range(5))), 431, None),
    ("101-headers", head_with(*(b"X-H%d: %d" % (i, i) for i in range(100))), 431, None),
    ("tls-handshake", bytes.fromhex("160301020001000001fc0303") + bytes(range(64)), 400, None),
    ("binary-garbage", bytes(random.Random(7).randbytes(2000)), 400, None),
    ("nul-bytes", b"\x00" * 100, 400, None),
    ("no-host-http11", b"GET /echo HTTP/1.1\r\nAccept: */*\r\n\r\n", 400, None),
    ("two-hosts", head_with(b"Host: www.example.com"), 400, None),
    ("host-with-userinfo", b"GET / HTTP/1.1\r\nHost: user@www.example.com\r\n\r\n", 400, None),
    ("host-with-space", b"GET / HTTP/1.1\r\nHost: www.example.com evil\r\n\r\n", 400, None),
    ("content-length-and-chunked",
     head_with(b"Content-Length: 5", b"Transfer-Encoding: chunked", request_line=b"POST / HTTP/1.1")
     + b"0\r\n\r\n", 400, None),
    ("two-different-content-lengths",
     head_with(b"Content-Length: 5", b"Content-Length: 6", request_line=b"POST / HTTP/1.1") + b"hello!",
     400, None),
    ("content-length-with-sign", head_with(b"Content-Length: +5", request_line=b"POST / HTTP/1.1") + b"hello",
     400, None),
    ("content-length-list", head_with(b"Content-Length: 5, 5", request_line=b"POST / HTTP/1.1") + b"hello",
     400, None),
    ("te-gzip", head_with(b"Transfer-Encoding: gzip", request_line=b"POST / HTTP/1.1") + b"xxxx", 400, None),
    ("te-gzip-chunked", head_with(b"Transfer-Encoding: gzip, chunked", request_line=b"POST / HTTP/1.1")
     + b"0\r\n\r\n", 400, None),
    ("te-in-http10", b"POST / HTTP/1.0\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, None),
    ("chunk-size-not-hex", head_with(b"Transfer-Encoding: chunked", request_line=b"POST / HTTP/1.1")
     + b"5\r\nhello\r\n5x\r\nworld\r\n0\r\n\r\n", 400, 11),
    ("chunk-size-overflow", head_with(b"Transfer-Encoding: chunked", request_line=b"POST / HTTP/1.1")
     + b"10000000000000005\r\nhello\r\n0\r\n\r\n", 400, 15),
    ("chunk-size-negative", head_with(b"Transfer-Encoding: chunked", request_line=b"POST / HTTP/1.1")
     + b"-5\r\nhello\r\n0\r\n\r\n", 400, 0),
    ("chunk-data-without-crlf", head_with(b"Transfer-Encoding: chunked", request_line=b"POST / HTTP/1.1")
     + b"5\r\nhelloXX\r\n0\r\n\r\n", 400, 8),
    ("chunk-size-bare-lf", head_with(b"Transfer-Encoding: chunked", request_line=b"POST / HTTP/1.1")
     + b"5\nhello\r\n0\r\n\r\n", 400, 1),
    # trailer lines are header lines: the same syntax, and no more than 100
    ("trailer-space-before-colon", CHUNKED + b"0\r\nX-A : b\r\n\r\n", 400, 6),
    ("trailer-no-colon", CHUNKED + b"0\r\nX-Ab\r\n\r\n", 400, 6),
    ("trailer-name-not-token", CHUNKED + b"0\r\nX(A): b\r\n\r\n", 400, 4),
    ("trailer-empty-name", CHUNKED + b"0\r\n: b\r\n\r\n", 400, 3),
    ("trailer-obs-fold", CHUNKED + b"0\r\nX-A: b\r\n c\r\n\r\n", 400, 11),
    ("trailer-obs-fold-tab", CHUNKED + b"0\r\nX-A: b\r\n\tc\r\n\r\n", 400, 11),
    ("trailer-nul", CHUNKED + b"0\r\nX-A: b\x00c\r\n\r\n", 400, 9),
    ("trailer-bare-cr", CHUNKED + b"0\r\nX-A: b\rX-B: c\r\n\r\n", 400, 9),
    ("trailer-del", CHUNKED + b"0\r\nX-A: b\x7fc\r\n\r\n", 400, 9),
    ("trailer-101-lines", CHUNKED + b"0\r\n" + b"".join(b"X-T%03d: 1\r\n" % i for i in range(101)) + b"\r\n",
     400, 3 + 100 * 11),
    ("obs-fold", head_with(b"X-Folded: one", b" two"), 400, None),
    ("obs-fold-tab", head_with(b"X-Folded: one", b"\ttwo"), 400, None),
    ("space-before-colon", head_with(b"Transfer-Encoding : chunked", request_line=b"POST / HTTP/1.1")
     + b"0\r\n\r\n", 400, None),
    ("bare-cr", head_with(b"X-A: one\rX-B: two"), 400, None),
    ("bare-cr-before-request-line", b"\r\rGET / HTTP/1.1\r\n" + H + b"\r\n", 400, None),
    ("bare-cr-request-line", b"GET / HTTP/1.1\rHost: www.example.com\r\n\r\n", 400, None),
    ("nul-in-value", head_with(b"X-A: one\x00two"), 400, None),
    ("empty-header-name", head_with(b": value"), 400, None),
    ("no-version", b"GET /echo\r\n" + H + b"\r\n", 400, None),
    ("http-2.0", head_with(request_line=b"GET /echo HTTP/2.0"), 505, None),
    ("http-1.2", head_with(request_line=b"GET /echo HTTP/1.2"), 505, None),
    ("http-0.9", head_with(request_line=b"GET /echo HTTP/0.9"), 505, None),
    ("lower-case-http", head_with(request_line=b"GET /echo http/1.1"), 400, None),
    ("version-1.10", head_with(request_line=b"GET /echo HTTP/1.10"), 400, None),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("data, status, body_may_pass",
                         [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_request_then_normal_request(refusing, stage, data, status, body_may_pass):
    """Bytes rsp must not pass on, from a raw socket: rsp answers with its
    own error (414 for a request line too long, 431 for a header line or
    head too large or more than 100 headers, 505 for another HTTP
    version, 400 for anything malformed or ambiguous) and closes that
    connection. Nothing reaches a backend, except, for a bad chunk, the
    head and the body before the bad byte (never the bad part): up to
    stage 08 rsp forwards those as soon as the backend connection is up;
    from stage 09 it frames the body bytes that came with the head before
    writing anything, so the backend connection it opened may also close
    without a byte; from stage 17, which reads a body whole before
    choosing a backend, nothing reaches one. Then a normal request on the
    same proxy is served."""
    recorder, proxy = refusing
    before = len(recorder.received)
    assert_rsp_answer(exchange(proxy.port, data), status)
    if body_may_pass is not None and stage < 17:
        (stream,) = recorded(recorder, before=before)
        if stream or stage <= 8:
            _, _, rest = split_forwarded(stream)
            body = data.partition(b"\r\n\r\n")[2]
            assert body.startswith(rest) and len(rest) <= body_may_pass, \
                f"the backend got more of the bad body than its good start: {rest!r}"
        before += 1
    else:
        assert len(recorder.received) == before and recorder.connections == before, \
            "a refused request reached the backend"
    r = exchange(proxy.port, http_request(target="/normal"))
    assert r.status == 200 and r.header("X-Backend") == "recorder", f"{r!r} {r.raw[:300]!r}"
    (stream,) = recorded(recorder, before=before)
    assert stream.startswith(b"GET /normal HTTP/1.1\r\n")


@pytest.mark.stage(6)
def test_100_headers_accepted(make_raw_backend, start_proxy):
    """Exactly 100 header fields (Host, 98 more and Connection: close) are
    accepted and all but the hop-by-hop Connection reach the backend; the
    101st is one too many (test_refused_...)."""
    recorder = make_raw_backend(record_request)
    proxy = start_proxy(recorder)
    lines = [b"X-H%d: %d" % (i, i) for i in range(98)]
    r = exchange(proxy.port, head_with(*lines, CLOSE[:-2]))
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    _, header_lines, _ = split_forwarded(recorded(recorder)[0])
    kept, _ = kept_and_added(header_lines)
    assert kept == ["Host: www.example.com"] + [line.decode() for line in lines]


def request_line_of(size):
    """A request line of exactly `size` bytes, CRLF included."""
    return b"GET /" + b"a" * (size - 16) + b" HTTP/1.1\r\n"


def header_line_of(size):
    """A header line of exactly `size` bytes, CRLF included."""
    return b"X-Fill: " + b"b" * (size - 10) + b"\r\n"


def head_of(size, max_line):
    """A request head of exactly `size` bytes (Connection: close among its
    headers), no line longer than max_line."""
    start = b"GET / HTTP/1.1\r\n" + H + CLOSE
    room = size - len(start) - 2
    lines = []
    while room > 0:
        n = min(room, max_line)
        if room - n and room - n < 16:  # leave room for a last line of at least 16 bytes
            n -= 16
        lines.append(b"X-F%03d: " % len(lines) + b"c" * (n - 10) + b"\r\n")
        room -= n
    data = start + b"".join(lines) + b"\r\n"
    assert len(data) == size
    return data


@pytest.mark.stage(6)
@pytest.mark.parametrize("line, head", [(None, None), (256, 1024)], ids=["defaults-8192-32768", "256-1024"])
def test_head_limits_exact(make_raw_backend, start_proxy, line, head):
    """max_request_line and max_request_head (defaults 8192 and 32768
    bytes, CRLFs included) are exact: a request line, a header line or a
    head of the limit is served, one byte more gets 414 (request line) or
    431 (header line, head)."""
    recorder = make_raw_backend(record_request)
    options = {} if line is None else {"max_request_line": line, "max_request_head": head}
    proxy = start_proxy(recorder, **options)
    line, head = line or 8192, head or 32768
    host = H + CLOSE + b"\r\n"
    cases = [
        (request_line_of(line) + host, 200),
        (request_line_of(line + 1) + host, 414),
        (b"GET / HTTP/1.1\r\n" + H + CLOSE + header_line_of(line) + b"\r\n", 200),
        (b"GET / HTTP/1.1\r\n" + H + CLOSE + header_line_of(line + 1) + b"\r\n", 431),
        (head_of(head, line), 200),
        (head_of(head + 1, line), 431),
    ]
    served = 0
    for data, status in cases:
        r = exchange(proxy.port, data)
        if status == 200:
            served += 1
            assert r.status == 200, f"{len(data)} bytes: {r!r} {r.raw[:300]!r}"
            stream = recorded(recorder, served)[-1]
            assert stream.startswith(data.split(b"\r\n")[0] + b"\r\n")
        else:
            assert_rsp_answer(r, status)
    assert recorder.connections == served


@pytest.mark.stage(6)
def test_small_max_request_line_refuses_earlier(make_backend, start_proxy):
    """With max_request_line = 256, a 300-byte URL that the default limits
    let through gets 414, and so does a 300-byte header line 431."""
    backend = make_backend("a")
    default = start_proxy(backend)
    small = start_proxy(backend, max_request_line=256)
    long_url = http_request(target="/echo?" + "u" * 290)
    long_header = http_request(headers=[("X-Long", "h" * 290)])
    assert served_by(exchange(default.port, long_url)) == "a"
    assert served_by(exchange(default.port, long_header)) == "a"
    assert_rsp_answer(exchange(small.port, long_url), 414)
    assert_rsp_answer(exchange(small.port, long_header), 431)
    assert served_by(exchange(small.port, http_request())) == "a"
    assert backend.total_hits == 3


# -- draining -------------------------------------------------------------------------

@pytest.mark.stage(6)
@pytest.mark.parametrize("status", [421, 400])
def test_refused_request_with_large_body_gets_answer_not_reset(make_backend, start_proxy, status):
    """A client that sends an 800 kB body behind a request rsp refuses (a
    host nobody serves: 421; Content-Length and chunked both: 400) and
    only then reads gets the answer and a normal close, not a reset: rsp
    reads and drops the body instead of closing on unread data. Ten times
    over."""
    site = make_backend("site")
    proxy = start_proxy(sites={"www.example.com": [site]})
    body = pattern(800_000)
    host, headers = ("nobody.example.org", [("Content-Length", str(len(body)))]) if status == 421 else \
        ("www.example.com", [("Content-Length", str(len(body))), ("Transfer-Encoding", "chunked")])
    for _ in range(10):
        r = exchange(proxy.port, http_request(host, method="POST", headers=headers, body=body))
        assert_rsp_answer(r, status)
    assert site.total_hits == 0
    assert served_by(exchange(proxy.port, http_request("www.example.com"))) == "site"


# -- backends that do not answer properly ---------------------------------------------

GARBAGE = b"\x00\x01\x02 this is not HTTP \xff\xfe\r\n\r\nat all\n"


def send_garbage(conn, backend):
    """Reads a request head, answers with bytes that are not HTTP, and
    closes after a half-close and drain (no reset)."""
    read_head_then_close(conn, backend)
    conn.sendall(GARBAGE)
    conn.shutdown(socket.SHUT_WR)
    wait_for_eof(conn)


@pytest.mark.stage(6)
@pytest.mark.parametrize("handler", [close_at_once, read_head_then_close],
                         ids=["close-at-once", "read-head-then-close"])
def test_backend_closes_without_answering_gives_502(make_backend, make_raw_backend, start_proxy, handler):
    """A backend that accepts and closes without a word (before or after
    reading the request): the client gets rsp's 502, and the proxy serves
    the next request (another site's here)."""
    silent = make_raw_backend(handler)
    good = make_backend("good")
    proxy = start_proxy(good, sites={"silent.example.com": [silent]})
    for _ in range(3):
        assert_rsp_answer(exchange(proxy.port, http_request("silent.example.com")), 502)
    assert silent.connections == 3
    assert served_by(exchange(proxy.port, http_request("other.example.com"))) == "good"


@pytest.mark.stage(6)
def test_backend_answering_garbage(make_backend, make_raw_backend, start_proxy):
    """A backend that answers with bytes that are not HTTP: rsp does not
    read responses yet at this stage, so the client gets those bytes (a
    later stage may answer 502 instead); either way the connection ends
    and the proxy serves the next request."""
    bad = make_raw_backend(send_garbage)
    good = make_backend("good")
    proxy = start_proxy(good, sites={"bad.example.com": [bad]})
    r = exchange(proxy.port, http_request("bad.example.com"))
    assert r.raw == GARBAGE or r.status == 502, r.raw[:300]
    assert served_by(exchange(proxy.port, http_request("www.example.com"))) == "good"
    assert proxy.alive()


# -- many clients ---------------------------------------------------------------------

@pytest.mark.stage(6)
def test_many_concurrent_clients_get_their_own_answers(site_backends, start_proxy):
    """300 requests from 100 concurrent clients, spread over an exact
    site, a wildcard site and the default site, each with a unique token
    in its path and body: each gets the echo of its own request, from the
    site its Host names (no cross-talk between connections)."""
    proxy = start_sites_proxy(start_proxy, site_backends)
    hosts = [("www.example.com", "www"), ("c%d.example.com", "wild"), ("other%d.example.net", "default")]

    def one(i):
        host, site = hosts[i % 3]
        host = host.replace("%d", str(i))
        token = f"token-{i}-{random.Random(i).getrandbits(64):016x}"
        body = token.encode() * (1 + i % 7)
        r = exchange(proxy.port, http_request(host, method="POST", target=f"/echo?t={token}",
                                              headers=[("Content-Length", str(len(body)))], body=body))
        return i, site, token, body, r

    with ThreadPoolExecutor(100) as pool:
        results = list(pool.map(one, range(300)))
    for i, site, token, body, r in results:
        assert served_by(r) == site, f"request {i}"
        seen = r.json()
        assert seen["path"] == f"/echo?t={token}", f"request {i} got the answer to {seen['path']}"
        assert seen["body_length"] == len(body)
    assert [b.total_hits for b in site_backends.values()] == [100, 100, 0, 100]
