"""Helpers shared by the stage 21 tests (issue 30): files served from a
`root`, compression on the way out, and a site's output settings
(headers, error_pages).

- write_tree(root, {relative path: bytes}) makes the files of a test;
- html_text(size) is a compressible HTML page (words, not a pattern);
- decode(encoding, data) decodes a whole body with Python's modules
  (zlib, brotli, zstandard), decode_with_tool() with gzip, brotli and zstd
  run as programs, StreamDecoder a body as it arrives;
- PageBackend serves pages a test defines (status, headers, body; chunked,
  or held half-way until the test sets an Event);
- read_with_rss() reads a body while sampling rsp's resident memory;
- fetch() makes one request, start_tls_proxy() and h2_client() give
  HTTPS and HTTP/2.

Nothing here sleeps to wait for something: a held page waits on an Event
the test sets, and every wait is bounded.
"""

import hashlib
import os
import random
import subprocess
import time
import zlib

import pytest

from backends import KeepAliveBackend
from client import READ_TIMEOUT, Conn, ConnectionEnded
from proxy import is_sanitized, vm_rss

KiB = 1024
MiB = 1024 * KiB
ENCODINGS = ("gzip", "br", "zstd")
WWW = "www.example.test"  # the name of the TLS tests' certificate (SNI and Host)
HOLD_WAIT = 30.0  # s: a held page gives up waiting for the test's Event after this (a guard)
WORDS = ("proxy", "reverse", "request", "response", "header", "stream", "backend", "client", "epoll",
         "socket", "buffer", "encoder", "gzip", "brotli", "zstd", "listener", "timeout", "worker")


def write_tree(root, files):
    """Writes {relative path: bytes} under root (directories made as
    needed); returns root."""
    for name, content in files.items():
        path = os.path.join(str(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    return root


def html_text(size, seed=0):
    """An HTML page of exactly `size` bytes: paragraphs of words chosen by
    a seeded generator, so it compresses well but is no simple repeat."""
    rng = random.Random(seed)
    parts, total = [b"<!DOCTYPE html>\n<html><head><title>rsp</title></head><body>\n"], 0
    total = len(parts[0])
    while total < size:
        line = ("<p>" + " ".join(rng.choice(WORDS) for _ in range(12)) + f" {rng.randrange(10**6)}</p>\n").encode()
        parts.append(line)
        total += len(line)
    return b"".join(parts)[:size]


def decode(encoding, data):
    """`data` decoded from `encoding` (gzip, br, zstd) by Python's modules."""
    if encoding == "gzip":
        return zlib.decompress(data, 16 + zlib.MAX_WBITS)
    if encoding == "br":
        import brotli
        return brotli.decompress(data)
    if encoding == "zstd":
        import zstandard
        out = zstandard.ZstdDecompressor().decompressobj()
        return out.decompress(data)
    raise ValueError(f"no decoder for {encoding!r}")


TOOLS = {"gzip": ["gzip", "-d", "-c"], "br": ["brotli", "-d", "-c"], "zstd": ["zstd", "-d", "-c", "-q"]}


def decode_with_tool(encoding, data):
    """`data` decoded by the real command-line tool for `encoding`; fails
    if the tool refuses it."""
    result = subprocess.run(TOOLS[encoding], input=data, capture_output=True, timeout=READ_TIMEOUT)
    assert result.returncode == 0, (f"{' '.join(TOOLS[encoding])} refused the body ({len(data)} bytes): "
                                    f"{result.stderr.decode(errors='replace')}")
    return result.stdout


class StreamDecoder:
    """Decodes a body of `encoding` piece by piece: feed(bytes) returns
    what decodes so far."""

    def __init__(self, encoding):
        if encoding == "gzip":
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self.feed = self._d.decompress
        elif encoding == "br":
            import brotli
            self._d = brotli.Decompressor()
            self.feed = self._d.process
        elif encoding == "zstd":
            import zstandard
            self._d = zstandard.ZstdDecompressor().decompressobj()
            self.feed = self._d.decompress
        else:
            raise ValueError(f"no decoder for {encoding!r}")


def next_chunk(reader):
    """The data of the next chunk of a chunked body from a client.Reader
    (b"" for the last chunk, whose trailer section is read too)."""
    line = reader.until(b"\r\n", "a chunk-size line")
    size = int(line[:-2].split(b";")[0], 16)
    if size == 0:
        while reader.until(b"\r\n", "the trailer section") != b"\r\n":
            pass
        return b""
    data = reader.exactly(size + 2, "chunk data")
    assert data[-2:] == b"\r\n", f"chunk data not followed by CRLF: {data[-10:]!r}"
    return data[:-2]


class Page:
    """What PageBackend answers on one path: status, extra headers, body;
    chunked sends it in the chunked coding, hold (a threading.Event) sends
    the first half (chunked), then waits for the Event before the rest."""

    def __init__(self, body, status=200, headers=(), chunked=False, hold=None):
        self.body, self.status, self.headers = body, status, list(headers)
        self.chunked = chunked or hold is not None
        self.hold = hold


class PageBackend(KeepAliveBackend):
    """A KeepAliveBackend (it records every request) answering the paths
    in `pages` ({path: Page}, set by the test) as they say; any other path
    as KeepAliveBackend does."""

    def __init__(self, name="pages"):
        super().__init__(name)
        self.pages = {}

    def add(self, path, body, content_type="text/html", status=200, headers=(), **options):
        """Defines the answer to GET `path`."""
        fields = [("Content-Type", content_type)] if content_type else []
        self.pages[path] = Page(body, status, fields + list(headers), **options)

    def _route_default(self, info, record, query, head_only, closing):
        path = record.target.split("?", 1)[0]
        page = self.pages.get(path)
        if page is None:
            return super()._route_default(info, record, query, head_only, closing)
        if not page.chunked:
            self._answer(info, record, head_only, closing, page.body, page.status, "Page", page.headers)
            return None
        head = self._head(info, record, page.status, "Page", page.headers + [("Transfer-Encoding", "chunked")],
                          closing)
        if head_only:
            info.sock.sendall(head)
            return None
        half = len(page.body) // 2
        info.sock.sendall(head + b"%x\r\n%s\r\n" % (half, page.body[:half]))
        if page.hold is not None and not page.hold.wait(HOLD_WAIT):
            return "the test never set the Event"
        rest = page.body[half:]
        info.sock.sendall((b"%x\r\n%s\r\n" % (len(rest), rest) if rest else b"") + b"0\r\n\r\n")
        return None

    def stop(self):
        for page in self.pages.values():
            if page.hold is not None:
                page.hold.set()
        super().stop()


def read_with_rss(sock, length, pid, samples_every=8 * MiB, digest=None, first=b""):
    """Reads exactly `length` body bytes from `sock` (`first` already came
    with the head), sampling process pid's VmRSS every `samples_every`
    bytes; returns (sha256 hex of the body, or the bytes when digest is
    False, highest RSS seen)."""
    h = hashlib.sha256(first) if digest is not False else None
    kept = [first] if digest is False else None
    got, highest, next_sample = len(first), vm_rss(pid), samples_every
    while got < length:
        chunk = sock.recv(min(1 << 20, length - got))
        if not chunk:
            raise ConnectionEnded(f"the body ended after {got} of {length} bytes")
        got += len(chunk)
        if h is not None:
            h.update(chunk)
        else:
            kept.append(chunk)
        if got >= next_sample:
            highest = max(highest, vm_rss(pid))
            next_sample += samples_every
    return (h.hexdigest() if h is not None else b"".join(kept)), highest


PAUSE_SAMPLES = 8
PAUSE_STEP = 0.125  # s: a paused reader's memory is sampled this often, over a second (a watch, not a wait)


def assert_paused_rss(proxy, before, limit, what):
    """While the client pauses (a second), rsp's VmRSS stays within
    `limit` bytes above `before` (not judged under AddressSanitizer)."""
    highest = 0
    for _ in range(PAUSE_SAMPLES):
        time.sleep(PAUSE_STEP)  # the reader's pause, while memory is sampled
        highest = max(highest, vm_rss(proxy.pid))
    if not is_sanitized(proxy.binary):
        assert highest - before < limit, f"rsp's VmRSS grew by {(highest - before) // KiB} KiB for {what}"


def zeros_sha256(length):
    """The sha256 of `length` zero bytes (a sparse file's content)."""
    h, block = hashlib.sha256(), bytes(MiB)
    full, rest = divmod(length, MiB)
    for _ in range(full):
        h.update(block)
    h.update(bytes(rest))
    return h.hexdigest()


def fetch(proxy, target, method="GET", headers=(), host=None):
    """One request on a new connection to the proxy, its response read by
    its framing (a client.Response)."""
    with Conn(proxy.port, host=host) as c:
        return c.request(method, target, headers)


def tokens(r, name):
    """The lowercase comma-separated tokens of every `name` header of r
    (a client.Response or an h2client.Stream)."""
    return [t.strip().lower() for v in r.header_values(name.lower()) for t in v.split(",") if t.strip()]


def start_tls_proxy(start_proxy, tmp_path, *backends, **options):
    """start_proxy with a TLS listener too (proxy.tls_port), serving a
    certificate for WWW from the session's CA (proxy.ca); skipped without
    python3-trustme."""
    pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")
    from test_tls import start_tls
    from tlsutil import session_ca
    ca = session_ca()
    proxy = start_tls(start_proxy, *backends, certificates=[ca.issue(tmp_path, "stage21", [WWW])], **options)
    proxy.ca = ca
    return proxy


def h2_client(proxy):
    """An HTTP/2 client (h2client.H2Client) of a start_tls_proxy's TLS
    port; skipped without python3-h2."""
    pytest.importorskip("h2", reason="python3-h2 is not installed (./setup-env.sh installs it)")
    from h2client import H2Client, h2_context
    return H2Client(proxy.tls_port, h2_context(proxy.ca), WWW)
