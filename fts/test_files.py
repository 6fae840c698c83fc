"""Files served from a `root` (stage 21, issue 30): GET and HEAD byte-exact
with Content-Type by extension, Content-Length, Last-Modified and a strong
ETag "<mtime hex>-<size hex>"; 405 with Allow for other methods; /dir ->
301 /dir/, /dir/ -> its index.html, never a listing; hidden segments,
traversal in every spelling, symlinks leading out, FIFOs: 404 and never a
byte of what lies outside (a secret planted beside root); conditionals in
RFC 9110's order; one Range (206/416, several or malformed ignored),
If-Range; precompressed x.br/x.zst/x.gz chosen by Accept-Encoding; a
1 GiB file plain and over TLS with bounded memory, a slow reader; HTTP/2;
keep-alive; the access log; sites and pools of files beside backends;
the O_NOFOLLOW walk rsp falls back to without openat2 (RSP_NO_OPENAT2=1);
a file that shrinks (cut off, logged) or grows (the length announced)
while sent, a client gone midway, a stalled reader, an HTTP/2 stream
reset: the file is closed each time.

Every file is made by the test in tmp_path; memory is judged by rsp's
VmRSS (not under AddressSanitizer, whose allocator keeps freed memory)."""

import email.utils
import gzip
import os

import pytest

from checks import wait_for_log
from client import READ_TIMEOUT, Conn, Reader, build_request, connect, read_framed_response, request_bytes
from files_util import (WWW, KiB, MiB, PageBackend, assert_paused_rss, decode, fetch, h2_client, read_with_rss,
                        start_tls_proxy, tokens, write_tree, zeros_sha256)
from netutil import wait_for
from pattern import assert_same_bytes, pattern
from proxy import is_sanitized, vm_rss
from test_access_log import assert_line, parse, wait_lines

pytestmark = pytest.mark.stage(21)

MTIME = 1_700_000_000          # the mtime the tests give their files (os.utime)
SECRET = b"TOP-SECRET-4c1d9e: this file lies beside root and must never be served\n"
RSS_LIMIT = 64 * MiB           # rsp's VmRSS while it sends a file of any size
SLOW_RSS_GROWTH = 16 * MiB     # what a paused reader of a big file may add to it
HTML = b"<!DOCTYPE html>\n<html><body><h1>index</h1></body></html>\n"
CSS = b"body { color: #123456; margin: 0 auto; }\n" * 40


# -- fixtures and helpers --------------------------------------------------------------


@pytest.fixture
def root(tmp_path):
    """A web root (tmp_path/www) with a few files, and SECRET beside it
    (tmp_path/secret, and tmp_path/outside/secret)."""
    www = tmp_path / "www"
    write_tree(www, {
        "index.html": HTML, "small.txt": b"hello, files\n", "empty.txt": b"", "style.css": CSS,
        "app.js": b"console.log('rsp');\n", "image.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "data.unknownext": b"\x00\x01\x02", "noextension": b"plain bytes\n",
        "dir/index.html": b"<p>the dir's index</p>\n", "dir/page.txt": b"in dir\n",
        "nodir/file.txt": b"a directory without index.html\n",
        ".env": SECRET, ".git/config": SECRET, "dir/.hidden": SECRET,
    })
    write_tree(tmp_path, {"secret": SECRET, "outside/secret": SECRET})
    for dirpath, _, names in os.walk(www):
        for name in names:
            os.utime(os.path.join(dirpath, name), (MTIME, MTIME))
    return www


def serve(start_proxy, root, *backends, **options):
    """rsp whose default site serves files from `root`."""
    return start_proxy(*backends, root=str(root), **options)


def raw_fetch(proxy, request_line):
    """Sends `request_line` (bytes, e.g. with a target no client library
    would send) with a Host header; the response by its framing."""
    with Conn(proxy.port) as c:
        c.send(request_line + b"\r\nHost: " + c.host.encode() + b"\r\n\r\n")
        return c.read_response()


def etag_of(size, mtime=MTIME, suffix=""):
    return f'"{mtime:x}-{size:x}{suffix}"'


LAST_MODIFIED = email.utils.formatdate(MTIME, usegmt=True)


def assert_file(r, content, content_type=None, head=False):
    """r is a 200 of a file with `content`, its validators those of MTIME."""
    assert r.status == 200, f"{r!r} {r.headers} {r.body[:200]!r}"
    assert r.header("Content-Length") == str(len(content)), r.headers
    if not head:
        assert_same_bytes(r.body, content)
    else:
        assert r.body == b"", "a HEAD got a body"
    assert r.header("Last-Modified") == LAST_MODIFIED, r.headers
    assert r.header("ETag") == etag_of(len(content)), r.headers
    assert r.header("Accept-Ranges") == "bytes", r.headers
    if content_type is not None:
        assert r.header("Content-Type") == content_type, r.headers


def assert_not_found(r, what):
    assert r.status == 404, f"{what}: {r!r} {r.headers}"
    assert SECRET not in r.raw, f"{what}: the secret was served"


# -- GET and HEAD ---------------------------------------------------------------------


@pytest.mark.parametrize("name,content_type", [
    ("index.html", "text/html; charset=utf-8"), ("style.css", "text/css; charset=utf-8"),
    ("image.png", "image/png"), ("data.unknownext", "application/octet-stream"),
    ("noextension", "application/octet-stream"), ("empty.txt", "text/plain; charset=utf-8"),
    ("small.txt", "text/plain; charset=utf-8")])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_file_byte_exact_with_its_headers(start_proxy, root, name, content_type, method):
    proxy = serve(start_proxy, root)
    r = fetch(proxy, "/" + name, method)
    assert_file(r, (root / name).read_bytes(), content_type, head=method == "HEAD")


def test_javascript_type(start_proxy, root):
    """.js is text/javascript in /etc/mime.types (application/javascript in
    older tables): either way with charset=utf-8."""
    proxy = serve(start_proxy, root)
    r = fetch(proxy, "/app.js")
    assert r.header("Content-Type") in ("text/javascript; charset=utf-8",
                                        "application/javascript; charset=utf-8"), r.headers


def test_big_random_file(start_proxy, tmp_path):
    content = os.urandom(5 * MiB + 7)
    www = write_tree(tmp_path / "www", {"big.bin": content})
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/big.bin")
    assert r.status == 200 and r.header("Content-Length") == str(len(content)), r.headers
    assert_same_bytes(r.body, content)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_other_methods_405(start_proxy, root, method):
    proxy = serve(start_proxy, root)
    with Conn(proxy.port) as c:
        r = c.request(method, "/small.txt", body=b"x" if method in ("POST", "PUT") else b"")
    assert r.status == 405, f"{r!r} {r.headers}"
    assert r.header("Allow") == "GET, HEAD", r.headers


# -- directories -----------------------------------------------------------------------


@pytest.mark.parametrize("target,location", [("/dir", "/dir/"), ("/dir?x=1&y=2", "/dir/?x=1&y=2"),
                                             ("/nodir", "/nodir/")])
def test_directory_without_slash_redirects(start_proxy, root, target, location):
    proxy = serve(start_proxy, root)
    r = fetch(proxy, target)
    assert r.status == 301, f"{r!r} {r.headers}"
    assert r.header("Location") == location, r.headers


def test_directory_redirect_stays_on_this_host(start_proxy, root):
    """A directory named like a host, asked for as //example.com: the
    request is refused (400: rsp's request checks) or redirected to a
    path on this host ("/example.com/"), never to "//example.com/", which
    a browser reads as another host."""
    (root / "example.com").mkdir()
    proxy = serve(start_proxy, root)
    for target in (b"//example.com", b"///example.com?a=1", b"/example.com"):
        r = raw_fetch(proxy, b"GET " + target + b" HTTP/1.1")
        if r.status == 400:
            continue
        assert r.status == 301, f"{target!r}: {r!r} {r.headers}"
        assert r.header("Location") == "/example.com/" + ("?a=1" if b"?" in target else ""), r.headers


def test_well_known_is_served(start_proxy, root):
    """RFC 8615's /.well-known/ is the one hidden name served, and only
    at the top: a hidden file inside it, or a .well-known deeper down, is
    404 like any other."""
    write_tree(root, {".well-known/security.txt": b"Contact: mailto:me@example.org\n",
                      ".well-known/.hidden": SECRET, "dir/.well-known/x": SECRET})
    proxy = serve(start_proxy, root)
    r = fetch(proxy, "/.well-known/security.txt")
    assert r.status == 200 and r.body == b"Contact: mailto:me@example.org\n", f"{r!r} {r.headers}"
    for target in ("/.well-known/.hidden", "/dir/.well-known/x"):
        assert_not_found(fetch(proxy, target), target)


def test_directory_index_and_no_listing(start_proxy, root):
    proxy = serve(start_proxy, root)
    assert fetch(proxy, "/dir/").body == b"<p>the dir's index</p>\n"
    assert_file(fetch(proxy, "/"), HTML, "text/html; charset=utf-8")
    r = fetch(proxy, "/nodir/")
    assert_not_found(r, "a directory without index.html")
    assert b"file.txt" not in r.body, "a directory was listed"


# -- what is never served --------------------------------------------------------------


@pytest.mark.parametrize("target", ["/.env", "/.git/config", "/.git/", "/.git", "/dir/.hidden",
                                    "/%2egit/config", "/%2Eenv"])
def test_hidden_segments_404(start_proxy, root, target):
    proxy = serve(start_proxy, root)
    assert_not_found(fetch(proxy, target), target)


TRAVERSALS = [b"/../secret", b"/%2e%2e/secret", b"/%2E%2E%2Fsecret", b"/..%2fsecret", b"/./../secret",
              b"/dir/./../../secret", b"/%252e%252e/secret", b"/%252e%252e%252fsecret", b"/..\\secret",
              b"/dir\\..\\..\\secret", b"/dir/%00/../../secret", b"/secret%00.txt", b"/%2e%2e/outside/secret",
              b"/dir/../../outside/secret", b"//../secret"]


@pytest.mark.parametrize("target", TRAVERSALS, ids=lambda t: t.decode())
def test_traversal_never_serves_the_secret(start_proxy, root, target):
    """Whether rsp refuses the target (400) or finds nothing there (404),
    no byte of the file beside root comes back."""
    proxy = serve(start_proxy, root)
    r = raw_fetch(proxy, b"GET " + target + b" HTTP/1.1")
    assert r.status in (400, 404), f"{target!r}: {r!r} {r.headers}"
    assert SECRET not in r.raw, f"{target!r} served the secret"


def test_absolute_form_traversal(start_proxy, root):
    proxy = serve(start_proxy, root)
    for target in (b"http://127.0.0.1/../secret", b"http://127.0.0.1/%2e%2e/secret"):
        r = raw_fetch(proxy, b"GET " + target + b" HTTP/1.1")
        assert r.status in (400, 404), f"{target!r}: {r!r}"
        assert SECRET not in r.raw, f"{target!r} served the secret"


def test_symlinks(start_proxy, root, tmp_path):
    """A symlink staying beneath root is served; one leading out (to a file
    or to a directory) is a 404."""
    os.symlink("small.txt", root / "inside-link.txt")
    os.symlink("dir", root / "inside-dir")
    os.symlink(tmp_path / "secret", root / "out-file")
    os.symlink(tmp_path / "outside", root / "out-dir")
    os.symlink("../secret", root / "dir" / "up-link")
    proxy = serve(start_proxy, root)
    assert fetch(proxy, "/inside-link.txt").body == b"hello, files\n"
    assert fetch(proxy, "/inside-dir/page.txt").body == b"in dir\n"
    for target in ("/out-file", "/out-dir/secret", "/dir/up-link"):
        assert_not_found(fetch(proxy, target), target)


def test_fifo_is_404_and_does_not_hang(start_proxy, root):
    os.mkfifo(root / "pipe")
    proxy = serve(start_proxy, root)
    with Conn(proxy.port) as c:
        assert c.get("/pipe").status == 404
        assert c.get("/small.txt").body == b"hello, files\n"
    assert fetch(proxy, "/small.txt").status == 200


def test_fallback_walk_without_openat2(start_proxy, root, tmp_path, monkeypatch):
    """RSP_NO_OPENAT2=1 makes rsp walk one component at a time with
    O_NOFOLLOW: every symlink is then a 404, files are served as ever."""
    os.symlink("small.txt", root / "inside-link.txt")
    os.symlink(tmp_path / "secret", root / "out-file")
    os.symlink("dir", root / "inside-dir")
    monkeypatch.setenv("RSP_NO_OPENAT2", "1")
    proxy = serve(start_proxy, root)
    for target in ("/inside-link.txt", "/out-file", "/inside-dir/page.txt"):
        assert_not_found(fetch(proxy, target), target)
    assert_file(fetch(proxy, "/small.txt"), b"hello, files\n")
    assert fetch(proxy, "/dir/page.txt").body == b"in dir\n"
    assert_not_found(fetch(proxy, "/../secret"), "../secret")


# -- conditionals ------------------------------------------------------------------------


SMALL_ETAG = etag_of(len(b"hello, files\n"))
EARLIER = email.utils.formatdate(MTIME - 3600, usegmt=True)
LATER = email.utils.formatdate(MTIME + 3600, usegmt=True)


@pytest.mark.parametrize("headers", [
    [("If-None-Match", SMALL_ETAG)], [("If-None-Match", "W/" + SMALL_ETAG)],
    [("If-None-Match", f'"nope", {SMALL_ETAG}, "other"')], [("If-None-Match", "*")],
    [("If-Modified-Since", LAST_MODIFIED)], [("If-Modified-Since", LATER)],
    [("If-None-Match", SMALL_ETAG), ("If-Modified-Since", EARLIER)]],
    ids=["exact", "weak", "list", "star", "ims-equal", "ims-later", "inm-wins"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_not_modified(start_proxy, root, headers, method):
    proxy = serve(start_proxy, root)
    r = fetch(proxy, "/small.txt", method, headers)
    assert r.status == 304, f"{headers}: {r!r} {r.headers}"
    assert r.body == b"" and r.header("Content-Length") is None, r.headers
    assert r.header("ETag") == SMALL_ETAG and r.header("Last-Modified") == LAST_MODIFIED, r.headers


@pytest.mark.parametrize("headers", [
    [("If-None-Match", '"nope"')], [("If-Modified-Since", EARLIER)], [("If-Modified-Since", "yesterday")],
    [("If-None-Match", '"nope"'), ("If-Modified-Since", LATER)], [("If-Match", SMALL_ETAG)],
    [("If-Unmodified-Since", LATER)]],
    ids=["inm-other", "ims-earlier", "ims-garbage", "ims-ignored-with-inm", "if-match", "ius-later"])
def test_modified_is_200(start_proxy, root, headers):
    proxy = serve(start_proxy, root)
    assert_file(fetch(proxy, "/small.txt", headers=headers), b"hello, files\n")


@pytest.mark.parametrize("headers", [
    [("If-Match", '"nope"')], [("If-Match", "W/" + SMALL_ETAG)], [("If-Unmodified-Since", EARLIER)],
    [("If-Match", '"nope"'), ("If-None-Match", SMALL_ETAG)]],
    ids=["if-match-other", "if-match-weak", "ius-earlier", "if-match-first"])
def test_precondition_failed(start_proxy, root, headers):
    proxy = serve(start_proxy, root)
    r = fetch(proxy, "/small.txt", headers=headers)
    assert r.status == 412, f"{headers}: {r!r} {r.headers}"
    assert b"hello, files" not in r.body


# -- ranges ------------------------------------------------------------------------------


RANGE_SIZE = 1000


@pytest.fixture
def ranged(tmp_path):
    content = os.urandom(RANGE_SIZE)
    www = write_tree(tmp_path / "www", {"r.bin": content})
    os.utime(www / "r.bin", (MTIME, MTIME))
    return www, content


@pytest.mark.parametrize("spec,first,last", [("bytes=0-99", 0, 99), ("bytes=100-", 100, 999),
                                             ("bytes=-100", 900, 999), ("bytes=0-0", 0, 0),
                                             ("bytes=900-5000", 900, 999), ("bytes=-5000", 0, 999)])
def test_one_range(start_proxy, ranged, spec, first, last):
    www, content = ranged
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/r.bin", headers=[("Range", spec)])
    assert r.status == 206, f"{spec}: {r!r} {r.headers}"
    assert r.header("Content-Range") == f"bytes {first}-{last}/{RANGE_SIZE}", r.headers
    assert r.header("Content-Length") == str(last - first + 1), r.headers
    assert r.body == content[first:last + 1]


@pytest.mark.parametrize("spec", ["bytes=0-1,5-6", "bytes=0-99, 200-299", "bytes=abc", "bytes=5-1",
                                  "items=0-1", "bytes=", "bytes=1-2-3", "0-99"])
def test_ignored_range_is_whole_200(start_proxy, ranged, spec):
    www, content = ranged
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/r.bin", headers=[("Range", spec)])
    assert r.status == 200, f"{spec}: {r!r} {r.headers}"
    assert r.body == content and r.header("Content-Range") is None


@pytest.mark.parametrize("spec", ["bytes=1000-", "bytes=5000-6000", "bytes=1000-1000"])
def test_unsatisfiable_range_416(start_proxy, ranged, spec):
    www, _ = ranged
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/r.bin", headers=[("Range", spec)])
    assert r.status == 416, f"{spec}: {r!r} {r.headers}"
    assert r.header("Content-Range") == f"bytes */{RANGE_SIZE}", r.headers


def test_suffix_range_of_an_empty_file_is_200(start_proxy, root):
    """RFC 9110 14.1.1: a suffix range is satisfiable even for an empty
    file, and there is no byte to send: the whole (empty) file, 200; a
    range from a first byte is 416."""
    proxy = serve(start_proxy, root)
    r = fetch(proxy, "/empty.txt", headers=[("Range", "bytes=-10")])
    assert r.status == 200 and r.body == b"" and r.header("Content-Range") is None, f"{r!r} {r.headers}"
    r = fetch(proxy, "/empty.txt", headers=[("Range", "bytes=0-")])
    assert r.status == 416 and r.header("Content-Range") == "bytes */0", f"{r!r} {r.headers}"


@pytest.mark.parametrize("if_range,status", [(etag_of(RANGE_SIZE), 206), ('"stale"', 200),
                                             ("W/" + etag_of(RANGE_SIZE), 200), (LAST_MODIFIED, 206),
                                             (EARLIER, 200)])
def test_if_range(start_proxy, ranged, if_range, status):
    www, content = ranged
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/r.bin", headers=[("Range", "bytes=10-19"), ("If-Range", if_range)])
    assert r.status == status, f"If-Range {if_range}: {r!r} {r.headers}"
    assert r.body == (content[10:20] if status == 206 else content)


def test_range_on_head_is_ignored(start_proxy, ranged):
    www, content = ranged
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/r.bin", "HEAD", [("Range", "bytes=0-9")])
    assert r.status == 200 and r.header("Content-Length") == str(RANGE_SIZE), r.headers


# -- precompressed variants --------------------------------------------------------------


@pytest.fixture
def variants(tmp_path):
    """x.css with its .br, .zst and .gz beside it (each its own mtime)."""
    import brotli
    import zstandard
    encoded = {"br": brotli.compress(CSS), "zstd": zstandard.ZstdCompressor().compress(CSS),
               "gzip": gzip.compress(CSS)}
    suffixes = {"br": ".br", "zstd": ".zst", "gzip": ".gz"}
    www = write_tree(tmp_path / "www", {"x.css": CSS, **{"x.css" + suffixes[e]: b for e, b in encoded.items()}})
    for n, name in enumerate(("x.css", "x.css.br", "x.css.zst", "x.css.gz")):
        os.utime(www / name, (MTIME + n, MTIME + n))
    return www, encoded


VARIANT = {"br": ("-br", 1), "zstd": ("-zst", 2), "gzip": ("-gz", 3)}  # ETag suffix, mtime offset


@pytest.mark.parametrize("accept,chosen", [
    ("br, zstd, gzip", "br"), ("gzip, zstd", "zstd"), ("gzip", "gzip"), ("*", "br"),
    ("gzip;q=1, br;q=0.5", "gzip"), ("zstd;q=0.9, br;q=0.8, gzip;q=0.95", "gzip"), ("x-gzip", "gzip"),
    ("br;q=0, *", "zstd"), ("GZIP , Br ;q=0.1", "gzip"),
    (None, None), ("identity", None), ("*;q=0", None), ("br;q=0, zstd;q=0, gzip;q=0", None),
    ("deflate, compress", None)])
def test_precompressed_variant(start_proxy, variants, accept, chosen):
    www, encoded = variants
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/x.css", headers=[("Accept-Encoding", accept)] if accept is not None else [])
    assert r.status == 200, f"{r!r} {r.headers}"
    assert r.header("Content-Type") == "text/css; charset=utf-8", r.headers
    assert "accept-encoding" in tokens(r, "Vary"), r.headers
    if chosen is None:
        assert r.header("Content-Encoding") is None, r.headers
        assert r.body == CSS and r.header("ETag") == etag_of(len(CSS)), r.headers
        return
    suffix, offset = VARIANT[chosen]
    assert r.header("Content-Encoding") == chosen, f"Accept-Encoding {accept!r}: {r.headers}"
    assert r.header("Content-Length") == str(len(encoded[chosen])), r.headers
    assert r.header("ETag") == etag_of(len(encoded[chosen]), MTIME + offset, suffix), r.headers
    assert r.body == encoded[chosen]
    assert decode(chosen, r.body) == CSS


def test_precompressed_only_some_present(start_proxy, variants):
    """Only x.css.gz left: a client accepting br and gzip gets gzip."""
    www, encoded = variants
    os.unlink(www / "x.css.br")
    os.unlink(www / "x.css.zst")
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/x.css", headers=[("Accept-Encoding", "br, zstd, gzip")])
    assert r.header("Content-Encoding") == "gzip" and r.body == encoded["gzip"], r.headers


def test_precompressed_from_every_accept_encoding_field(start_proxy, variants):
    """Two Accept-Encoding fields are one list (RFC 9110 5.3): "gzip;q=0.1"
    then "zstd": zstd, as the compression filter would choose."""
    www, encoded = variants
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/x.css", headers=[("Accept-Encoding", "gzip;q=0.1"), ("Accept-Encoding", "zstd")])
    assert r.header("Content-Encoding") == "zstd" and r.body == encoded["zstd"], r.headers


def test_vary_for_a_type_of_the_sites_compress_list(start_proxy, root):
    """A type rsp does not compress by default (application/octet-stream)
    but that the site's compress.types names varies on Accept-Encoding:
    another client may get it compressed."""
    write_tree(root, {"blob.bin": b"\x00" * 1000})
    plain = fetch(serve(start_proxy, root), "/blob.bin")
    assert "accept-encoding" not in tokens(plain, "Vary"), plain.headers
    proxy = serve(start_proxy, root, compress={"types": ["application/octet-stream"]})
    r = fetch(proxy, "/blob.bin")
    assert r.status == 200 and "accept-encoding" in tokens(r, "Vary"), r.headers


def test_precompressed_not_for_range(start_proxy, variants):
    www, _ = variants
    proxy = serve(start_proxy, www)
    r = fetch(proxy, "/x.css", headers=[("Accept-Encoding", "br"), ("Range", "bytes=0-9")])
    assert r.status == 206 and r.header("Content-Encoding") is None, r.headers
    assert r.body == CSS[:10]


# -- big files, bounded memory -----------------------------------------------------------


GIB = 1 << 30


@pytest.fixture
def sparse(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    with open(www / "huge.bin", "wb") as f:
        os.truncate(f.fileno(), GIB)
    return www


def download_huge(proxy, sock):
    """GET /huge.bin on `sock`; checks the sha256 of the whole body and
    rsp's VmRSS all along."""
    sock.sendall(build_request(proxy.port, "GET", "/huge.bin"))
    reader = Reader(sock)
    head = reader.until(b"\r\n\r\n", "the response head")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert b"\r\nContent-Length: %d\r\n" % GIB in head, head
    digest, highest = read_with_rss(sock, GIB, proxy.pid, first=reader.take(len(reader.buf)))
    assert digest == zeros_sha256(GIB), "the 1 GiB body is not the file's"
    if not is_sanitized(proxy.binary):
        assert highest < RSS_LIMIT, f"rsp's VmRSS reached {highest // MiB} MiB sending a 1 GiB file"


def test_one_gib_plain(start_proxy, sparse):
    proxy = serve(start_proxy, sparse)
    with connect(proxy.port) as sock:
        download_huge(proxy, sock)


def test_one_gib_tls(start_proxy, sparse, tmp_path):
    proxy = start_tls_proxy(start_proxy, tmp_path, root=str(sparse))
    from tlsutil import tls_connect
    with tls_connect(proxy.tls_port, proxy.ca.client_context(alpn=["http/1.1"]), WWW) as sock:
        download_huge(proxy, sock)


def test_slow_reader_bounded(start_proxy, tmp_path):
    """A client reads 64 KiB of a 64 MiB file and pauses: rsp's memory
    stays bounded while it waits (watched over a second, not a wait for
    anything); then the rest arrives byte-exact."""
    size = 64 * MiB
    content = pattern(size, offset=5)
    www = write_tree(tmp_path / "www", {"big.bin": content})
    proxy = serve(start_proxy, www)
    before = vm_rss(proxy.pid)
    with connect(proxy.port, rcvbuf=64 * KiB) as sock:
        sock.sendall(build_request(proxy.port, "GET", "/big.bin"))
        reader = Reader(sock)
        reader.until(b"\r\n\r\n", "the response head")
        got = reader.exactly(64 * KiB)
        assert_paused_rss(proxy, before, SLOW_RSS_GROWTH, "a paused reader")
        rest, _ = read_with_rss(sock, size - len(got), proxy.pid, digest=False,
                                first=reader.take(len(reader.buf)))
    assert_same_bytes(got + rest, content)


# -- protocols, connections, logs, sites ----------------------------------------------------


def test_http2_file(start_proxy, tmp_path):
    content = os.urandom(3 * MiB + 11)
    www = write_tree(tmp_path / "www", {"f.bin": content, "small.txt": b"hello\n"})
    proxy = start_tls_proxy(start_proxy, tmp_path, root=str(www))
    with h2_client(proxy) as c:
        big, small = c.get("/f.bin"), c.get("/small.txt")
        head = c.wait_ended(c.request("HEAD", "/f.bin"))
    assert big.status == 200 and big.header("content-length") == str(len(content)), big.headers
    assert_same_bytes(big.body, content)
    assert small.body == b"hello\n" and small.header("content-type") == "text/plain; charset=utf-8"
    assert head.status == 200 and head.body == b"" and head.header("content-length") == str(len(content))


def test_keep_alive_several_files(start_proxy, root):
    proxy = serve(start_proxy, root)
    with Conn(proxy.port) as c:
        assert c.get("/small.txt").body == b"hello, files\n"
        assert c.request("HEAD", "/style.css").header("Content-Length") == str(len(CSS))
        assert c.get("/missing").status == 404
        assert c.get("/style.css").body == CSS
        c.send(c.request_bytes("GET", "/index.html") + c.request_bytes("GET", "/dir/page.txt"))
        assert c.read_response().body == HTML
        assert c.read_response().body == b"in dir\n"


def test_access_log_line(start_proxy, root, tmp_path):
    log = str(tmp_path / "access.log")
    proxy = serve(start_proxy, root, access_log=log, access_log_format="timed")
    fetch(proxy, "/style.css")
    fetch(proxy, "/missing.txt")
    lines = wait_lines(log, 2)
    assert_line(lines[0], "GET /style.css HTTP/1.1", 200, len(CSS), timed=True, backend="-")
    assert_line(lines[1], "GET /missing.txt HTTP/1.1", 404, int(parse(lines[1], timed=True)["bytes"]), timed=True,
                backend="-")


def test_site_of_files_beside_site_of_backends(start_proxy, root):
    app = PageBackend("app")
    try:
        proxy = start_proxy(sites={"files.test": {"root": str(root)}, "app.test": [app]})
        assert_file(fetch(proxy, "/small.txt", host="files.test"), b"hello, files\n")
        r = fetch(proxy, "/small.txt", host="app.test")
        assert r.header("X-Backend") == "app" and r.body == b"path=/small.txt\n", r.headers
        assert app.requests == 1
    finally:
        app.stop()


ROUTE_STATIC = """
function route(req)
  if req.path:find("^/static/") then return "static" end
  return "app"
end
"""


def test_pool_of_files_chosen_by_route(start_proxy, tmp_path):
    app = PageBackend("app")
    try:
        www = write_tree(tmp_path / "www", {"static/a.txt": b"static a\n"})
        proxy = start_proxy(pools={"static": {"root": str(www)}, "app": [app]}, route=ROUTE_STATIC)
        assert fetch(proxy, "/static/a.txt").body == b"static a\n"
        assert fetch(proxy, "/static/none.txt").status == 404
        assert fetch(proxy, "/page").header("X-Backend") == "app"
        assert app.requests == 1, "a file request reached the backend"
    finally:
        app.stop()


def test_encoded_nul_404_and_serving_on(start_proxy, root):
    """A NUL decoded from %00 is a 404; the connection serves on."""
    proxy = serve(start_proxy, root)
    with Conn(proxy.port) as c:
        assert c.get("/small.txt%00").status == 404
        assert c.get("/small.txt").status == 200


def test_http10_client(start_proxy, root):
    """An HTTP/1.0 client gets the file, and the connection closes after it."""
    proxy = serve(start_proxy, root)
    with connect(proxy.port) as sock:
        sock.sendall(b"GET /small.txt HTTP/1.0\r\n\r\n")
        reader = Reader(sock)
        r = read_framed_response(reader)
        assert r.status == 200 and r.body == b"hello, files\n", r
        assert reader.to_eof() == b"" and reader.eof, "the connection stayed open after an HTTP/1.0 answer"


# -- a file that changes, a client that goes, a reader that stalls ------------------------


def file_fds(pid, path):
    """How many of process pid's fds are open on the file at `path`."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == str(path):
                count += 1
        except FileNotFoundError:
            pass  # closed while we looked
    return count


def start_download(proxy, path, rcvbuf=64 * KiB):
    """A socket with GET `path` sent (the connection to be kept) and the
    response head read; returns (socket, reader, head)."""
    sock = connect(proxy.port, rcvbuf=rcvbuf)
    sock.sendall(request_bytes("GET", path))
    reader = Reader(sock)
    return sock, reader, reader.until(b"\r\n\r\n", "the response head")


def read_until_closed(sock, reader):
    """The bytes the reader holds and those that come until the
    connection ends (its end of file, or a reset)."""
    got = [reader.take(len(reader.buf))]
    try:
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            got.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(got)


@pytest.mark.parametrize("splice", [True, False], ids=["sendfile", "pread"])
def test_file_that_shrinks_is_cut_off_and_logged(start_proxy, tmp_path, splice):
    """The file loses its tail while it is being sent: the client cannot
    get the length announced, so its connection is closed short of it,
    and rsp says why in its log."""
    size = 64 * MiB
    www = write_tree(tmp_path / "www", {"big.bin": pattern(size)})
    proxy = serve(start_proxy, www, splice=splice)
    sock, reader, head = start_download(proxy, "/big.bin")
    with sock:
        assert b"\r\nContent-Length: %d\r\n" % size in head, head
        reader.exactly(64 * KiB)
        os.truncate(www / "big.bin", MiB)
        body = read_until_closed(sock, reader)
    assert 64 * KiB + len(body) < size, "the whole length came from a file cut to 1 MiB"
    wait_for_log(proxy, "big.bin shrank while being sent", READ_TIMEOUT)


@pytest.mark.parametrize("splice", [True, False], ids=["sendfile", "pread"])
def test_file_that_grows_sends_the_length_announced(start_proxy, tmp_path, splice):
    """Bytes appended while the file is sent are not: the body is the
    length the head announced, and the connection serves on."""
    size = 8 * MiB
    content = pattern(size, offset=3)
    www = write_tree(tmp_path / "www", {"big.bin": content, "small.txt": b"small\n"})
    proxy = serve(start_proxy, www, splice=splice)
    sock, reader, head = start_download(proxy, "/big.bin")
    with sock:
        assert b"\r\nContent-Length: %d\r\n" % size in head, head
        first = reader.exactly(64 * KiB)
        with open(www / "big.bin", "ab") as f:
            f.write(b"appended" * (128 * KiB))
        rest = reader.exactly(size - len(first))
        assert_same_bytes(first + rest, content)
        sock.sendall(request_bytes("GET", "/small.txt"))
        r = read_framed_response(reader)
        assert r.status == 200 and r.body == b"small\n", r


@pytest.mark.parametrize("splice", [True, False], ids=["sendfile", "pread"])
def test_client_gone_midway_closes_the_file(start_proxy, tmp_path, splice):
    size = 64 * MiB
    www = write_tree(tmp_path / "www", {"big.bin": pattern(size)})
    proxy = serve(start_proxy, www, splice=splice)
    sock, reader, _ = start_download(proxy, "/big.bin")
    with sock:
        reader.exactly(64 * KiB)
        assert file_fds(proxy.pid, www / "big.bin") == 1, "rsp does not hold the file it sends"
    wait_for(lambda: file_fds(proxy.pid, www / "big.bin") == 0, "rsp to close the file of a client gone",
             READ_TIMEOUT)


def test_stalled_reader_idle_timeout(start_proxy, tmp_path):
    """A client that stops reading a file is closed by idle_timeout, and
    the file with it."""
    www = write_tree(tmp_path / "www", {"big.bin": pattern(64 * MiB)})
    proxy = serve(start_proxy, www, idle_timeout=1)
    sock, reader, _ = start_download(proxy, "/big.bin", rcvbuf=16 * KiB)
    with sock:
        reader.exactly(16 * KiB)
        wait_for_log(proxy, "idle_timeout (1 s) fired", 10)
        wait_for(lambda: file_fds(proxy.pid, www / "big.bin") == 0, "rsp to close the file", 10)


def test_http2_stream_reset_midway_closes_the_file(start_proxy, tmp_path):
    www = write_tree(tmp_path / "www", {"big.bin": pattern(32 * MiB), "small.txt": b"small\n"})
    proxy = start_tls_proxy(start_proxy, tmp_path, root=str(www))
    with h2_client(proxy) as c:
        sid = c.request("GET", "/big.bin")
        c.wait(lambda: file_fds(proxy.pid, www / "big.bin") == 1, "rsp to open the file")
        c.reset(sid)
        wait_for(lambda: file_fds(proxy.pid, www / "big.bin") == 0, "rsp to close the file of a reset stream",
                 READ_TIMEOUT)
        assert c.get("/small.txt").body == b"small\n"
