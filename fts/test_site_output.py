"""A site's output settings (stage 21, issue 30): `headers` (a name set to
a string replaces any header of that name, false removes it) on proxied
responses, files and rsp's own answers, merged top level -> pool -> site;
`error_pages` (status -> a file read at load) sent with the original
status, the page's bytes and a Content-Type from its extension, for rsp's
own 404/502/503 and, with `backends = true`, for a backend's own answer
with a status in the table (false: the backend's body goes through). Over
HTTP/1.1 and HTTP/2, GET and HEAD."""

import pytest

from checks import wait_for_log
from client import Conn
from files_util import PageBackend, fetch, h2_client, start_tls_proxy, write_tree
from netutil import closed_ports
from test_health import CHECK, went_down_by_check

pytestmark = pytest.mark.stage(21)

PAGE_502 = b"<!DOCTYPE html>\n<title>down</title><h1>We are updating: back in a minute</h1>\n"
PAGE_503 = b"<!DOCTYPE html>\n<title>busy</title><h1>No backend can take it now</h1>\n"
PAGE_404 = b"Nothing here (our own 404 page, plain text)\n"
PAGE_500 = b"<!DOCTYPE html>\n<title>oops</title><h1>Something broke</h1>\n"
EDITS = {"X-Frame-Options": "DENY", "X-Replaced": "by rsp", "Server": False, "X-Gone": False}


@pytest.fixture
def app():
    """A backend whose answers carry Server, X-Replaced and X-Gone, on
    /ok (200), /missing (404) and /broken (500)."""
    backend = PageBackend("app")
    own = [("Server", "backend/1.0"), ("X-Replaced", "by the backend"), ("X-Gone", "yes")]
    backend.add("/ok", b"backend ok\n", "text/plain", headers=own)
    backend.add("/missing", b"the backend's own 404\n", "text/plain", status=404, headers=own)
    backend.add("/broken", b"the backend's own 500\n", "text/plain", status=500, headers=own)
    yield backend
    backend.stop()


@pytest.fixture
def pages(tmp_path):
    """The error page files: {status: path}."""
    www = write_tree(tmp_path / "errors", {"502.html": PAGE_502, "503.html": PAGE_503, "404.txt": PAGE_404,
                                           "500.html": PAGE_500})
    return {502: str(www / "502.html"), 503: str(www / "503.html"), 404: str(www / "404.txt"),
            500: str(www / "500.html")}


@pytest.fixture
def www(tmp_path):
    return write_tree(tmp_path / "www", {"f.txt": b"a file\n"})


def dead_backend():
    """(host, port) where connections are refused: rsp answers 502."""
    return ("127.0.0.1", closed_ports(1)[0])


def assert_edited(r):
    """r (a client.Response or an h2client.Stream) carries EDITS: set,
    replaced once, removed."""
    assert r.header_values("x-frame-options") == ["DENY"], r.headers
    assert r.header_values("x-replaced") == ["by rsp"], r.headers
    assert r.header("server") is None and r.header("x-gone") is None, r.headers


def assert_page(r, status, body, content_type, head=False):
    """r is an error page: the original status, the page's bytes (none for
    HEAD) and Content-Length, its Content-Type."""
    assert r.status == status, f"{r!r} {r.headers}"
    assert r.header("Content-Type") == content_type, r.headers
    assert r.header("Content-Length") == str(len(body)), r.headers
    assert r.body == (b"" if head else body), r.body[:300]


# -- headers ------------------------------------------------------------------------------


def test_headers_on_proxied_responses(start_proxy, app):
    proxy = start_proxy(app, headers=EDITS)
    for target, status in (("/ok", 200), ("/missing", 404), ("/broken", 500)):
        r = fetch(proxy, target)
        assert r.status == status, r
        assert_edited(r)


def test_headers_on_files_and_rsp_own_answers(start_proxy, www):
    """A file, a 404 from root, a 405 and a 301 of a directory all carry them."""
    write_tree(www, {"dir/index.html": b"<p>i</p>\n"})
    proxy = start_proxy(root=str(www), headers=EDITS)
    for target, method, status in (("/f.txt", "GET", 200), ("/f.txt", "HEAD", 200), ("/none", "GET", 404),
                                   ("/f.txt", "DELETE", 405), ("/dir", "GET", 301)):
        r = fetch(proxy, target, method)
        assert r.status == status, f"{method} {target}: {r!r}"
        assert r.header_values("X-Frame-Options") == ["DENY"], f"{method} {target}: {r.headers}"
        assert r.header_values("X-Replaced") == ["by rsp"], r.headers


def test_headers_on_a_502(start_proxy):
    proxy = start_proxy(dead_backend(), headers=EDITS)
    r = fetch(proxy, "/")
    assert r.status == 502, r
    assert_edited(r)


def test_server_false_removes_the_backends(start_proxy, app):
    proxy = start_proxy(app, headers={"Server": False})
    r = fetch(proxy, "/ok")
    assert r.status == 200 and r.header("Server") is None, r.headers
    assert r.header("X-Replaced") == "by the backend", r.headers


def test_headers_merge_top_pool_site(start_proxy, app):
    """The site's entries over its pool's over the top level's, by name;
    false removes what a level above set."""
    proxy = start_proxy(app, headers={"X-Top": "top", "X-Shared": "top", "X-Both": "top"},
                        pools={"p": {"backends": [app], "headers": {"X-Pool": "pool", "X-Shared": "pool"}}},
                        sites={"site.test": {"pool": "p", "headers": {"X-Site": "site", "X-Top": False,
                                                                       "X-Both": "site"}},
                               "plain.test": {"pool": "p"}, "own.test": {"backends": [app]}})
    expected = {
        "site.test": {"x-top": None, "x-shared": "pool", "x-both": "site", "x-pool": "pool", "x-site": "site"},
        "plain.test": {"x-top": "top", "x-shared": "pool", "x-both": "top", "x-pool": "pool", "x-site": None},
        "own.test": {"x-top": "top", "x-shared": "top", "x-both": "top", "x-pool": None, "x-site": None},
        "other.test": {"x-top": "top", "x-shared": "top", "x-both": "top", "x-pool": None, "x-site": None},
    }
    for host, fields in expected.items():
        r = fetch(proxy, "/ok", host=host)
        assert r.status == 200, r
        got = {name: (r.header_values(name) or [None]) for name in fields}
        assert got == {name: [value] for name, value in fields.items()}, f"{host}: {r.headers}"


# -- error pages --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_error_page_for_a_502(start_proxy, pages, method):
    proxy = start_proxy(dead_backend(), error_pages={502: pages[502]})
    assert_page(fetch(proxy, "/", method), 502, PAGE_502, "text/html; charset=utf-8", head=method == "HEAD")


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_error_page_for_a_404_from_root(start_proxy, pages, www, method):
    proxy = start_proxy(root=str(www), error_pages={404: pages[404]})
    assert_page(fetch(proxy, "/nothing", method), 404, PAGE_404, "text/plain; charset=utf-8", head=method == "HEAD")
    assert fetch(proxy, "/f.txt").body == b"a file\n"


def test_error_page_for_a_503(start_proxy, pages, make_backend):
    """A pool whose only backend is down by its health checks: rsp's own
    503 is the page."""
    down = make_backend("down")
    down.health_status = 503
    proxy = start_proxy(down, health_check=CHECK, error_pages={503: pages[503]})
    wait_for_log(proxy, went_down_by_check(down), 10.0)
    assert_page(fetch(proxy, "/"), 503, PAGE_503, "text/html; charset=utf-8")


def test_error_page_with_headers(start_proxy, pages):
    proxy = start_proxy(dead_backend(), error_pages={502: pages[502]}, headers=EDITS)
    r = fetch(proxy, "/")
    assert_page(r, 502, PAGE_502, "text/html; charset=utf-8")
    assert_edited(r)


@pytest.mark.parametrize("backends", [None, False, True])
def test_backends_own_error_answers(start_proxy, app, pages, backends):
    """backends = true: a backend's 404 and 500 become the pages (status
    kept, the backend's body never sent); false or absent: they go through
    as the backend wrote them. A 200 is never touched."""
    table = {404: pages[404], 500: pages[500]}
    if backends is not None:
        table["backends"] = backends
    proxy = start_proxy(app, error_pages=table)
    missing, broken, ok = fetch(proxy, "/missing"), fetch(proxy, "/broken"), fetch(proxy, "/ok")
    if backends:
        assert_page(missing, 404, PAGE_404, "text/plain; charset=utf-8")
        assert_page(broken, 500, PAGE_500, "text/html; charset=utf-8")
        assert b"the backend's own" not in missing.raw + broken.raw
    else:
        assert (missing.status, missing.body) == (404, b"the backend's own 404\n"), missing
        assert (broken.status, broken.body) == (500, b"the backend's own 500\n"), broken
    assert (ok.status, ok.body) == (200, b"backend ok\n"), ok


def test_backend_error_replaced_keep_alive(start_proxy, app, pages):
    """The replaced answers' bodies are dropped whole: the connection and
    the next request on it are fine."""
    proxy = start_proxy(app, error_pages={404: pages[404], "backends": True})
    with Conn(proxy.port) as c:
        assert_page(c.get("/missing"), 404, PAGE_404, "text/plain; charset=utf-8")
        assert c.get("/ok").body == b"backend ok\n"
        assert_page(c.request("HEAD", "/missing"), 404, PAGE_404, "text/plain; charset=utf-8", head=True)
        assert c.get("/ok").body == b"backend ok\n"


def test_site_error_pages_replace_the_top_levels(start_proxy, app, pages):
    proxy = start_proxy(app, error_pages={404: pages[404], "backends": True},
                        sites={"own.test": {"backends": [app], "error_pages": {500: pages[500], "backends": True}}})
    assert_page(fetch(proxy, "/missing"), 404, PAGE_404, "text/plain; charset=utf-8")
    assert fetch(proxy, "/missing", host="own.test").body == b"the backend's own 404\n"
    assert_page(fetch(proxy, "/broken", host="own.test"), 500, PAGE_500, "text/html; charset=utf-8")


# -- over HTTP/2 ----------------------------------------------------------------------------


def test_error_pages_and_headers_over_http2(start_proxy, app, pages, tmp_path):
    proxy = start_tls_proxy(start_proxy, tmp_path, app, headers=EDITS,
                            error_pages={404: pages[404], 500: pages[500], "backends": True})
    with h2_client(proxy) as c:
        ok, missing = c.get("/ok"), c.get("/missing")
        head = c.wait_ended(c.request("HEAD", "/broken"))
    assert ok.status == 200 and ok.body == b"backend ok\n", ok
    assert_edited(ok)
    assert missing.status == 404 and missing.body == PAGE_404, missing
    assert missing.header("content-type") == "text/plain; charset=utf-8", missing.headers
    assert_edited(missing)
    assert head.status == 500 and head.body == b"", head
    assert head.header("content-length") == str(len(PAGE_500)), head.headers
