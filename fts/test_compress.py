"""Compression on the way out (stage 21, issue 30): with `compress` on, a
200 of a compressible type (text/*, JSON, JavaScript, XML, SVG, wasm,
application/*+json and *+xml by default, or the configured `types`) at
least `min_length` bytes long (256 by default) goes out in the best
encoding the client accepts (br > zstd > gzip on ties, by q-values), with
Content-Encoding, Vary: Accept-Encoding added once, no Content-Length
(chunked for HTTP/1.1, close-delimited for HTTP/1.0, DATA frames for
HTTP/2) and a strong ETag made weak. Never: HEAD, other statuses (206,
304, 404), a body already encoded, Cache-Control: no-transform, other
types, short bodies, compress off, a client accepting nothing.

Bodies come from real backends (PageBackend) or files, and are decoded
by the real tools (gzip, brotli, zstd) and by Python's modules to exactly
the original. Streaming is shown by events: a backend sends half a page,
then waits for the test, which first decodes a prefix of that half from
what rsp sent so far. status.json's "compression" figures and /metrics
move by exactly the responses made."""

import gzip
import threading

import pytest

from client import Conn, Reader, connect, read_framed_response, request_bytes
from files_util import (ENCODINGS, KiB, MiB, PageBackend, StreamDecoder, assert_paused_rss, decode, decode_with_tool,
                        fetch, h2_client, html_text, next_chunk, start_tls_proxy, tokens, write_tree)
from pattern import assert_same_bytes
from promparse import value as metric_value
from proxy import vm_rss
from test_status import metrics, start_with_status, wait_status

pytestmark = pytest.mark.stage(21)

PAGE = html_text(100 * KiB)
SLOW_RSS_GROWTH = 16 * MiB  # what a paused reader of an 8 MiB compressed response may add to rsp's VmRSS
PREFIX = 1 * KiB            # how much of the held first half must decode before the test lets the rest come


@pytest.fixture
def pages():
    backend = PageBackend("pages")
    backend.add("/page.html", PAGE)
    yield backend
    backend.stop()


def ask(proxy, target="/page.html", accept=None, method="GET", headers=(), host=None):
    """fetch() with Accept-Encoding: `accept` (None: no such header)."""
    extra = [("Accept-Encoding", accept)] if accept is not None else []
    return fetch(proxy, target, method, extra + list(headers), host)


def assert_compressed(r, encoding, original):
    """r is `original` compressed in `encoding`, as an HTTP/1.1 chunked
    response; returns the encoded body."""
    assert r.status == 200, f"{r!r} {r.headers}"
    assert r.header("Content-Encoding") == encoding, r.headers
    assert r.header("Content-Length") is None, r.headers
    assert r.framing == "chunked", f"expected chunked, got {r.framing}: {r.headers}"
    assert tokens(r, "Vary").count("accept-encoding") == 1, r.headers
    assert r.header("Accept-Ranges") is None, r.headers
    assert_same_bytes(decode(encoding, r.decoded), original, f"the {encoding} body decoded")
    return r.decoded


def assert_identity(r, original, status=200):
    """r carries `original` as it is, with its Content-Length."""
    assert r.status == status, f"{r!r} {r.headers}"
    assert r.header("Content-Encoding") in (None, "identity"), r.headers
    assert r.header("Content-Length") == str(len(original)), r.headers
    assert_same_bytes(r.decoded, original)


# -- each encoding, decoded by the real tools ----------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_encoding_decoded_by_the_tools(start_proxy, pages, encoding):
    proxy = start_proxy(pages, compress=True)
    body = assert_compressed(ask(proxy, accept=encoding), encoding, PAGE)
    assert len(body) < len(PAGE) // 2, f"{encoding} made {len(PAGE)} bytes into {len(body)}"
    assert_same_bytes(decode_with_tool(encoding, body), PAGE, f"{encoding} -d's output")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_http10_client_close_delimited(start_proxy, pages, encoding):
    proxy = start_proxy(pages, compress=True)
    with connect(proxy.port) as sock:
        sock.sendall(request_bytes("GET", "/page.html", [("Accept-Encoding", encoding)], version="1.0"))
        r = read_framed_response(Reader(sock))
    assert r.status == 200 and r.header("Content-Encoding") == encoding, r.headers
    assert r.framing == "close" and r.header("Transfer-Encoding") is None, r.headers
    assert_same_bytes(decode(encoding, r.body), PAGE)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_http2(start_proxy, pages, tmp_path, encoding):
    proxy = start_tls_proxy(start_proxy, tmp_path, pages, compress=True)
    with h2_client(proxy) as c:
        st = c.get("/page.html", headers=[("accept-encoding", encoding)])
    assert st.status == 200 and st.header("content-encoding") == encoding, st.headers
    assert st.header("content-length") is None, st.headers
    assert "accept-encoding" in tokens(st, "vary"), st.headers
    assert_same_bytes(decode(encoding, st.body), PAGE)


# -- headers -----------------------------------------------------------------------------


@pytest.mark.parametrize("vary,expected", [(None, ["accept-encoding"]), ("Origin", ["origin", "accept-encoding"]),
                                           ("Accept-Encoding", ["accept-encoding"]),
                                           ("Origin, accept-encoding", ["origin", "accept-encoding"]),
                                           ("*", ["*"])])
def test_vary(start_proxy, pages, vary, expected):
    pages.add("/vary.html", PAGE, headers=[("Vary", vary)] if vary else [])
    proxy = start_proxy(pages, compress=True)
    r = ask(proxy, "/vary.html", "gzip")
    assert r.header("Content-Encoding") == "gzip", r.headers
    assert tokens(r, "Vary") == expected, r.headers


@pytest.mark.parametrize("etag,expected", [('"x"', 'W/"x"'), ('W/"y"', 'W/"y"'), (None, None)])
def test_etag_made_weak(start_proxy, pages, etag, expected):
    pages.add("/etag.html", PAGE, headers=[("ETag", etag)] if etag else [])
    proxy = start_proxy(pages, compress=True)
    r = ask(proxy, "/etag.html", "br")
    assert r.header("Content-Encoding") == "br" and r.header("ETag") == expected, r.headers


# -- the client's choice -----------------------------------------------------------------------


@pytest.mark.parametrize("accept,chosen", [
    ("gzip;q=0.5, br;q=0.9", "br"), ("br;q=0, *", "zstd"), ("*", "br"), ("gzip, zstd", "zstd"),
    ("gzip, zstd, br", "br"), ("zstd;q=0.2, gzip;q=0.3", "gzip"), ("x-gzip", "gzip"), ("br;q=0.001", "br"),
    ("GZIP", "gzip"), ("  gzip ;q=0.8 ,BR; q=0.9  ", "br"), ("Zstd", "zstd"), ("deflate, gzip;q=1.000", "gzip"),
    ("*;q=0", None), ("identity", None), ("gzip;q=0", None), ("br;q=0, zstd;q=0, gzip;q=0", None),
    ("deflate", None), ("", None)])
def test_accept_encoding_choice(start_proxy, pages, accept, chosen):
    proxy = start_proxy(pages, compress=True)
    r = ask(proxy, accept=accept)
    if chosen is None:
        assert_identity(r, PAGE)
    else:
        assert_compressed(r, chosen, PAGE)


# -- never compressed ---------------------------------------------------------------------------


NOT_COMPRESSED = {
    "partial": dict(status=206, headers=[("Content-Range", f"bytes 0-{len(PAGE) - 1}/{len(PAGE) * 2}")]),
    "not-found": dict(status=404), "error": dict(status=500),
    "encoded": dict(headers=[("Content-Encoding", "gzip")], body=gzip.compress(PAGE)),
    "identity-then-gzip": dict(headers=[("Content-Encoding", "identity, gzip")], body=gzip.compress(PAGE)),
    "identity-encoded": dict(headers=[("Content-Encoding", "identity")], body=b"x" * 300 + PAGE, compress=True),
    "no-transform": dict(headers=[("Cache-Control", "public, no-transform")]),
    "png": dict(content_type="image/png"), "octets": dict(content_type="application/octet-stream"),
    "short": dict(body=PAGE[:255]),
}


@pytest.mark.parametrize("case", sorted(NOT_COMPRESSED))
def test_never_compressed(start_proxy, pages, case):
    """Each of these goes out as it came, whatever the client accepts
    (but a body that says Content-Encoding: identity, which counts as
    none: that one is compressed)."""
    spec = dict(NOT_COMPRESSED[case])
    body, compressed = spec.pop("body", PAGE), spec.pop("compress", False)
    pages.add("/case.html", body, **spec)
    proxy = start_proxy(pages, compress=True)
    r = ask(proxy, "/case.html", "br, zstd, gzip")
    if compressed:
        assert_compressed(r, "br", body)
        return
    assert r.status == spec.get("status", 200), r
    assert r.header("Content-Length") == str(len(body)), r.headers
    assert r.header("Content-Encoding") == dict(spec.get("headers", [])).get("Content-Encoding"), r.headers
    assert_same_bytes(r.body, body)


def test_head_and_304_not_compressed(start_proxy, pages):
    pages.add("/nm.html", b"", status=304, headers=[("ETag", '"v"')])
    proxy = start_proxy(pages, compress=True)
    r = ask(proxy, method="HEAD", accept="gzip")
    assert r.status == 200 and r.header("Content-Encoding") is None, r.headers
    assert r.header("Content-Length") == str(len(PAGE)) and r.body == b"", r.headers
    r = ask(proxy, "/nm.html", "gzip")
    assert r.status == 304 and r.header("Content-Encoding") is None and r.body == b"", r.headers


@pytest.mark.parametrize("compress", [None, False])
def test_compress_off(start_proxy, pages, compress):
    options = {} if compress is None else {"compress": compress}
    proxy = start_proxy(pages, **options)
    assert_identity(ask(proxy, accept="br, gzip"), PAGE)


def test_no_accept_encoding(start_proxy, pages):
    proxy = start_proxy(pages, compress=True)
    assert_identity(ask(proxy), PAGE)


@pytest.mark.parametrize("size,min_length,compressed", [(255, None, False), (256, None, True),
                                                        (999, 1000, False), (1000, 1000, True),
                                                        (100, 100, True), (100, 101, False)])
def test_min_length(start_proxy, pages, size, min_length, compressed):
    pages.add("/sized.html", PAGE[:size])
    compress = True if min_length is None else {"min_length": min_length}
    proxy = start_proxy(pages, compress=compress)
    r = ask(proxy, "/sized.html", "gzip")
    if compressed:
        assert_compressed(r, "gzip", PAGE[:size])
    else:
        assert_identity(r, PAGE[:size])


def test_chunked_answer_of_unknown_length_compressed(start_proxy, pages):
    """min_length judges a known Content-Length only: a chunked answer is
    compressed whatever its size."""
    pages.add("/tiny.html", b"<p>hi</p>\n", chunked=True)
    proxy = start_proxy(pages, compress=True)
    assert_compressed(ask(proxy, "/tiny.html", "zstd"), "zstd", b"<p>hi</p>\n")


# -- types ------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "TEXT/HTML; charset=UTF-8", "text/css", "application/json",
                                          "application/javascript", "application/x-javascript",
                                          "application/xml", "application/wasm", "image/svg+xml",
                                          "application/ld+json", "application/rss+xml",
                                          "application/manifest+json", "Application/JSON ; charset=utf-8"])
def test_default_types_compressed(start_proxy, pages, content_type):
    pages.add("/typed", PAGE, content_type=content_type)
    proxy = start_proxy(pages, compress=True)
    assert_compressed(ask(proxy, "/typed", "gzip"), "gzip", PAGE)


@pytest.mark.parametrize("content_type,compressed", [("application/x-custom", True), ("text/markdown", True),
                                                     ("text/html", False), ("application/json", False),
                                                     ("application/x-customer", False)])
def test_custom_types_replace_the_defaults(start_proxy, pages, content_type, compressed):
    pages.add("/typed", PAGE, content_type=content_type)
    proxy = start_proxy(pages, compress={"types": ["application/x-custom", "text/markdown"]})
    r = ask(proxy, "/typed", "gzip")
    if compressed:
        assert_compressed(r, "gzip", PAGE)
    else:
        assert_identity(r, PAGE)


def test_custom_wildcard_type(start_proxy, pages):
    pages.add("/typed", PAGE, content_type="application/vnd.thing")
    pages.add("/text", PAGE, content_type="text/plain")
    proxy = start_proxy(pages, compress={"types": ["application/*"], "min_length": 10})
    assert_compressed(ask(proxy, "/typed", "gzip"), "gzip", PAGE)
    assert_identity(ask(proxy, "/text", "gzip"), PAGE)


# -- where it applies -------------------------------------------------------------------------------


def test_per_site(start_proxy, pages):
    """A site's compress replaces the top level's, either way."""
    proxy = start_proxy(pages, compress=True, sites={"on.test": {"backends": [pages]},
                                                     "off.test": {"backends": [pages], "compress": False}})
    assert_compressed(ask(proxy, accept="gzip", host="on.test"), "gzip", PAGE)
    assert_identity(ask(proxy, accept="gzip", host="off.test"), PAGE)
    assert_compressed(ask(proxy, accept="gzip", host="other.test"), "gzip", PAGE)


def test_per_pool(start_proxy, pages):
    """A pool's compress applies to the sites naming it, unless the site
    says otherwise; the top level is off."""
    proxy = start_proxy(pages, pools={"app": {"backends": [pages], "compress": True}},
                        sites={"a.test": {"pool": "app"}, "b.test": {"pool": "app", "compress": False}})
    assert_compressed(ask(proxy, accept="br", host="a.test"), "br", PAGE)
    assert_identity(ask(proxy, accept="br", host="b.test"), PAGE)
    assert_identity(ask(proxy, accept="br", host="other.test"), PAGE)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_file_compressed_on_the_fly(start_proxy, tmp_path, encoding):
    """A file without a precompressed variant is compressed as it is sent."""
    www = write_tree(tmp_path / "www", {"page.html": PAGE})
    proxy = start_proxy(root=str(www), compress=True)
    r = ask(proxy, accept=encoding)
    assert_compressed(r, encoding, PAGE)
    assert r.header("ETag") is not None and r.header("ETag").startswith('W/"'), r.headers
    assert_identity(ask(proxy, accept=None), PAGE)


# -- streaming and memory ------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_streamed_before_the_backend_finishes(start_proxy, pages, encoding):
    """The backend sends the first half and waits: the client decodes the
    start of that half from what rsp sent so far; then the rest comes and
    the whole decodes to the page."""
    pages.add("/held.html", PAGE, hold=threading.Event())
    held = pages.pages["/held.html"].hold
    proxy = start_proxy(pages, compress=True)
    decoder, encoded, decoded = StreamDecoder(encoding), bytearray(), bytearray()
    with Conn(proxy.port) as c:
        c.send(c.request_bytes("GET", "/held.html", [("Accept-Encoding", encoding)]))
        head = c.reader.until(b"\r\n\r\n", "the response head")
        assert b"\r\nContent-Encoding: " + encoding.encode() + b"\r\n" in head, head
        while len(decoded) < PREFIX:
            chunk = next_chunk(c.reader)
            assert chunk, f"the body ended before the backend sent its second half ({len(decoded)} bytes decoded)"
            encoded += chunk
            decoded += decoder.feed(chunk)
        assert_same_bytes(bytes(decoded), PAGE[:len(decoded)], "what decodes of the first half")
        assert len(decoded) <= len(PAGE) // 2, "more than the first half came before the backend sent it"
        held.set()
        while chunk := next_chunk(c.reader):
            encoded += chunk
    assert_same_bytes(decode(encoding, bytes(encoded)), PAGE)


def test_large_response_slow_reader(start_proxy, pages):
    """8 MiB of HTML through a client that reads 64 KiB of it and pauses:
    rsp's memory stays bounded (watched over a second, not a wait for
    anything), then the rest arrives and decodes to the page."""
    big = html_text(8 * MiB, seed=8)
    pages.add("/big.html", big)
    proxy = start_proxy(pages, compress=True)
    before = vm_rss(proxy.pid)
    encoded = bytearray()
    with connect(proxy.port, rcvbuf=64 * KiB) as sock:
        sock.sendall(request_bytes("GET", "/big.html", [("Accept-Encoding", "gzip")], host=f"127.0.0.1:{proxy.port}"))
        reader = Reader(sock)
        assert b"\r\nContent-Encoding: gzip\r\n" in reader.until(b"\r\n\r\n", "the response head")
        while len(encoded) < 64 * KiB and (chunk := next_chunk(reader)):
            encoded += chunk
        assert_paused_rss(proxy, before, SLOW_RSS_GROWTH, "a paused reader")
        while chunk := next_chunk(reader):
            encoded += chunk
    assert_same_bytes(decode("gzip", bytes(encoded)), big)


# -- figures -------------------------------------------------------------------------------------


def test_status_and_metrics_count_exactly(start_proxy, pages):
    proxy = start_with_status(start_proxy, pages, compress=True)
    made = {"gzip": 2, "br": 1, "zstd": 3}
    bytes_in = bytes_out = 0
    for encoding, n in made.items():
        for _ in range(n):
            body = assert_compressed(ask(proxy, accept=encoding), encoding, PAGE)
            bytes_in += len(PAGE)
            bytes_out += len(body)
    assert_identity(ask(proxy), PAGE)
    doc = wait_status(proxy, lambda d: d["compression"]["responses"] == made and d["compression"]["encoders"] == 0,
                      f"{made} compressed responses counted, every encoder freed")
    figures = doc["compression"]
    assert figures["responses"] == made, figures
    assert figures["bytes_in"] == bytes_in and figures["bytes_out"] == bytes_out, figures
    assert figures["memory_bytes"] == 0, figures
    families = metrics(proxy)
    for encoding, n in made.items():
        assert metric_value(families, "rsp_compressed_responses_total", encoding=encoding) == n
    assert metric_value(families, "rsp_compression_bytes_in_total") == bytes_in
    assert metric_value(families, "rsp_compression_bytes_out_total") == bytes_out
    assert metric_value(families, "rsp_compression_memory_bytes") == 0


def test_figures_start_at_zero(start_proxy, pages):
    proxy = start_with_status(start_proxy, pages)
    figures = wait_status(proxy, lambda d: "compression" in d, "a compression section")["compression"]
    assert figures == {"responses": {"br": 0, "zstd": 0, "gzip": 0}, "bytes_in": 0, "bytes_out": 0,
                       "encoders": 0, "memory_bytes": 0}, figures
