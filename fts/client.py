"""A tiny HTTP client over raw sockets, to control exactly what the proxy sees.

The proxy of the early stages does not understand HTTP: it relays bytes
until the backend closes. So every request of request()/get() says
`Connection: close` and every response is read until end of file.

From stage 09 a connection carries many requests: Conn (and the framed
reader under it, read_framed_response) reads exactly one response at a
time by its framing, leaving whatever follows (a pipelined response) for
the next read.
"""

import json
import socket
import struct
import time

from netutil import LOOPBACK

READ_TIMEOUT = 30.0  # a guard against hanging, never a measured duration


class Response:
    """What came back on one connection, parsed leniently.

    raw is every byte received; status is None when no complete status line
    and header block arrived (e.g. the proxy closed without answering);
    reset is True if the connection ended with a reset instead of a FIN.

    A response read by its framing (read_framed_response, Conn) also has:
    version ("HTTP/1.1"), framing ("length", "chunked", "close" or "none"),
    body as it came on the wire (a chunked body with its chunk framing),
    decoded (the body without the chunked coding; the same as body
    otherwise), trailers (a chunked body's trailer fields), interim (the
    1xx responses that came before it, as Responses), complete (False if
    the connection ended before the framing said the response did), and
    eof (the connection ended right after it, or during it)."""

    def __init__(self, raw, reset=False):
        self.raw = raw
        self.reset = reset
        self.status = None
        self.reason = None
        self.version = None
        self.headers = []
        self.body = b""
        self.decoded = b""
        self.trailers = []
        self.interim = []
        self.framing = None
        self.complete = True
        self.eof = False
        head, sep, body = raw.partition(b"\r\n\r\n")
        if not sep:
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            return
        self.version = parts[0]
        self.status = int(parts[1])
        self.reason = parts[2] if len(parts) > 2 else ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers.append((name.strip(), value.strip()))
        self.body = self.decoded = body

    def header(self, name):
        """The last value of header `name` (case-insensitive), or None."""
        values = [v for n, v in self.headers if n.lower() == name.lower()]
        return values[-1] if values else None

    def header_values(self, name):
        """Every value of header `name` (case-insensitive), in order."""
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def connection_tokens(self):
        """The lowercased tokens of every Connection header."""
        return [t.strip().lower() for v in self.header_values("Connection") for t in v.split(",") if t.strip()]

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        more = f" framing={self.framing}" if self.framing else ""
        if self.interim:
            more += f" interim={[r.status for r in self.interim]}"
        if not self.complete:
            more += " INCOMPLETE"
        return (f"<Response status={self.status} raw={len(self.raw)} bytes body={len(self.body)} bytes"
                f"{more} reset={self.reset}>")


def connect(port, rcvbuf=None, timeout=READ_TIMEOUT, address=LOOPBACK, source=None):
    """A TCP socket connected to address:port (127.0.0.1 unless another
    address is given; IPv6 if it has a colon, e.g. "::1").

    rcvbuf sets SO_RCVBUF before connecting, so that the advertised window
    is small from the start (a slow reader). source binds the local end to
    that address first (any 127.x.y.z works on Linux loopback)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(timeout)
        if source is not None:
            sock.bind((source, 0))
        sock.connect((address, port))
    except BaseException:
        sock.close()
        raise
    return sock


def build_request(port, method="GET", path="/", headers=(), body=b"", host=None):
    """Request bytes with Host (127.0.0.1:PORT, or `host`) and `Connection:
    close` (and Content-Length when there is a body) added."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host or f'{LOOPBACK}:{port}'}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def recv_or_reset(sock, size, received, what="bytes"):
    """One read of a client that reads until end of file: up to `size`
    bytes (b"" at EOF), or None if the connection ended with a reset. No
    data within the socket timeout raises TimeoutError, saying that
    `received` `what` had arrived: the connection hung."""
    try:
        return sock.recv(size)
    except ConnectionResetError:
        return None
    except socket.timeout:
        raise TimeoutError(
            f"the connection neither ended nor sent anything for {sock.gettimeout()} s "
            f"(after {received} {what})") from None


def read_to_eof(sock, read_size=65536, read_delay=0.0, limit=None):
    """Reads until end of file (or `limit` bytes). Returns (data, reset).

    read_delay pauses between reads (a slowly reading client). A reset ends
    the read like EOF but is reported. No EOF within the socket timeout
    raises TimeoutError: the connection hung."""
    chunks, total, reset = [], 0, False
    while limit is None or total < limit:
        want = read_size if limit is None else min(read_size, limit - total)
        chunk = recv_or_reset(sock, want, total)
        if chunk is None:
            reset = True
            break
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if read_delay:
            time.sleep(read_delay)
    return b"".join(chunks), reset


def read_response(sock, **options):
    """Reads until end of file (options as for read_to_eof); returns the
    Response."""
    return Response(*read_to_eof(sock, **options))


def close_with_reset(sock):
    """Closes `sock` so that the peer gets a RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def request(port, path="/", method="GET", headers=(), body=b"", rcvbuf=None,
            half_close=False, pause_before_read=0.0, read_size=65536, read_delay=0.0,
            timeout=READ_TIMEOUT, host=None, address=LOOPBACK, source=None):
    """Sends one request to 127.0.0.1:port (or address:port, from the
    local address `source`: see connect()) and reads the answer until EOF.

    host: the Host header's value (default 127.0.0.1:PORT).
    half_close: shutdown(SHUT_WR) right after sending the request.
    pause_before_read: sleep this long before the first read.
    rcvbuf, read_size, read_delay: make the client a slow reader."""
    with connect(port, rcvbuf=rcvbuf, timeout=timeout, address=address, source=source) as sock:
        sock.sendall(build_request(port, method, path, headers, body, host))
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        if pause_before_read:
            time.sleep(pause_before_read)
        return read_response(sock, read_size=read_size, read_delay=read_delay)


def get(port, path="/", **options):
    return request(port, path, **options)


def exchange(port, data, byte_by_byte=False, **where):
    """Sends `data`, bytes exactly as given, on a new connection to `port`
    and reads the answer until EOF; returns the Response. `where`: address,
    source, timeout, as for connect(). byte_by_byte: one byte per segment
    (TCP_NODELAY, and a short pause after each so that they leave one by
    one)."""
    with connect(port, **where) as sock:
        if byte_by_byte:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for byte in data:
                sock.sendall(bytes([byte]))
                time.sleep(0.002)
        else:
            sock.sendall(data)
        return read_response(sock)


class HeldRequest:
    """A client whose POST to `path` lacks the last byte of its body (Host
    127.0.0.1:PORT, or `host`): the proxy has connected it to a backend
    (so that backend has one more open connection; from stage 06 on, rsp
    picks a backend once the head is complete), but the backend cannot
    answer yet. finish() sends the rest and returns the Response; close()
    abandons it."""

    def __init__(self, port, path="/echo?held=1", host=None):
        request_bytes = build_request(port, "POST", path, body=b"!", host=host)
        self.rest = request_bytes[-1:]
        self.sock = connect(port)
        self.sock.sendall(request_bytes[:-1])

    def finish(self):
        self.sock.sendall(self.rest)
        response = read_response(self.sock)
        self.close()
        return response

    def close(self):
        self.sock.close()


def read_some_then_close(port, path, nbytes, rst=False):
    """GETs `path`, reads `nbytes` bytes of the answer (fewer if it ends
    first), then closes mid-response; with rst, the close sends a RST.
    Returns how many bytes were read."""
    sock = connect(port)
    try:
        sock.sendall(build_request(port, "GET", path))
        data, _ = read_to_eof(sock, limit=nbytes)
    finally:
        if rst:
            close_with_reset(sock)
        else:
            sock.close()
    return len(data)


def leave_early(port, way, half_request):
    """One client that goes away early, in one of four ways (way % 4):
    close right after connecting, RST right after connecting, close after
    sending half_request (half a request), RST after it."""
    sock = connect(port)
    try:
        if way % 4 >= 2:
            sock.sendall(half_request)
    except OSError:
        pass  # the proxy may close first; that is its right
    if way % 2:
        close_with_reset(sock)
    else:
        sock.close()



# -- persistent connections (stage 09 on) ------------------------------------------


def request_bytes(method="GET", path="/", headers=(), body=b"", version="1.1", host="127.0.0.1"):
    """One request's bytes for a persistent connection: no Connection
    header is added. Host is added first unless `host` is None;
    Content-Length is added when there is a body (or the method is POST or
    PUT) unless `headers` has a Content-Length or Transfer-Encoding of its
    own (then `body` is sent as given, e.g. already chunked)."""
    lines = [f"{method} {path} HTTP/{version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [f"{name}: {value}" for name, value in headers]
    framed = any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers)
    if not framed and (body or method in ("POST", "PUT")):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(body, sizes, trailers=(), extensions=False):
    """`body` in the chunked coding, cut in pieces of the given sizes (the
    last piece takes what is left), then the last chunk and `trailers`
    (name, value) pairs. extensions adds a chunk extension to each size line."""
    out, at = bytearray(), 0
    pieces = []
    for size in sizes:
        if at >= len(body):
            break
        pieces.append(body[at:at + size])
        at += size
    if at < len(body):
        pieces.append(body[at:])
    for piece in pieces:
        ext = b";ext=1" if extensions else b""
        out += b"%x%s\r\n%s\r\n" % (len(piece), ext, piece)
    out += b"0\r\n"
    for name, value in trailers:
        out += f"{name}: {value}\r\n".encode("latin-1")
    out += b"\r\n"
    return bytes(out)


class ConnectionEnded(Exception):
    """The peer closed (or reset) the connection in the middle of a read."""


class Reader:
    """Buffered reads from one socket: what a read brings beyond the end
    of one response (a pipelined response, a tunnel's first bytes) stays
    in the buffer for the next."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.eof = False     # the peer closed: no more bytes will come
        self.reset = False   # ... with a reset

    def fill(self, what="bytes"):
        """One recv into the buffer; False at EOF or reset. No data within
        the socket timeout raises TimeoutError."""
        if self.eof:
            return False
        try:
            chunk = self.sock.recv(262144)
        except ConnectionResetError:
            self.eof = self.reset = True
            return False
        except socket.timeout:
            raise TimeoutError(f"nothing arrived for {self.sock.gettimeout()} s while reading {what} "
                               f"({len(self.buf)} bytes buffered: {bytes(self.buf[:200])!r})") from None
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def take(self, n):
        piece = bytes(self.buf[:n])
        del self.buf[:n]
        return piece

    def until(self, delimiter, what="bytes"):
        """The bytes up to and including `delimiter`; raises ConnectionEnded
        if the connection ends first (what came stays in the buffer)."""
        start = 0
        while True:
            end = self.buf.find(delimiter, start)
            if end != -1:
                return self.take(end + len(delimiter))
            start = max(0, len(self.buf) - len(delimiter) + 1)
            if not self.fill(what):
                raise ConnectionEnded(what)

    def exactly(self, n, what="bytes"):
        while len(self.buf) < n:
            if not self.fill(what):
                raise ConnectionEnded(what)
        return self.take(n)

    def to_eof(self, what="bytes until the connection ends"):
        while self.fill(what):
            pass
        return self.take(len(self.buf))


NO_BODY_STATUSES = (204, 304)


def _read_chunked(reader, response):
    """Reads a chunked body; sets body (raw), decoded and trailers."""
    raw, decoded = bytearray(), bytearray()
    try:
        while True:
            line = reader.until(b"\r\n", "a chunk-size line")
            raw += line
            size_text = line[:-2].split(b";")[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise AssertionError(f"a malformed chunk-size line {line[:100]!r}") from None
            if size == 0:
                break
            data = reader.exactly(size + 2, "chunk data")
            raw += data
            if data[-2:] != b"\r\n":
                raise AssertionError(f"chunk data of {size} bytes not followed by CRLF: {data[-10:]!r}")
            decoded += data[:-2]
        while True:
            line = reader.until(b"\r\n", "the trailer section")
            raw += line
            if line == b"\r\n":
                break
            name, _, value = line[:-2].decode("latin-1").partition(":")
            response.trailers.append((name.strip(), value.strip()))
    except ConnectionEnded:
        raw += reader.take(len(reader.buf))
        response.complete = False
    response.body, response.decoded = bytes(raw), bytes(decoded)


def read_framed_response(reader, head=False):
    """Reads exactly one final response from `reader` (a Reader) by its
    framing, with the 1xx responses before it (except 101, which is
    final) in .interim. head: the request was HEAD (no body whatever the
    headers say). A 1xx, 204 or 304 has no body; else chunked, then
    Content-Length, then until the connection ends (a close-delimited
    body). If the connection ends before a complete head, the Response has
    status None (raw: what came) and eof set."""
    interim = []
    while True:
        try:
            head_bytes = reader.until(b"\r\n\r\n", "a response head")
        except ConnectionEnded:
            r = Response(reader.take(len(reader.buf)), reader.reset)
            r.interim, r.eof, r.complete = interim, True, False
            return r
        r = Response(head_bytes)
        if r.status is None:
            raise AssertionError(f"not an HTTP response head: {head_bytes[:300]!r}")
        if 100 <= r.status < 200 and r.status != 101:
            r.framing = "none"
            interim.append(r)
            continue
        break
    r.interim = interim
    te = [t.strip().lower() for v in r.header_values("Transfer-Encoding") for t in v.split(",") if t.strip()]
    if head or r.status in NO_BODY_STATUSES or 100 <= r.status < 200:
        r.framing = "none"
    elif te and te[-1] == "chunked":
        r.framing = "chunked"
        _read_chunked(reader, r)
    elif te:
        r.framing = "close"
    elif r.header("Content-Length") is not None:
        r.framing = "length"
        length = int(r.header("Content-Length"))
        try:
            r.body = r.decoded = reader.exactly(length, f"a body of {length} bytes")
        except ConnectionEnded:
            r.body = r.decoded = reader.take(len(reader.buf))
            r.complete = False
    else:
        r.framing = "close"
    if r.framing == "close":
        r.body = r.decoded = reader.to_eof("a close-delimited body")
    r.raw = head_bytes + r.body
    r.eof, r.reset = reader.eof, reader.reset
    return r


class Conn:
    """A persistent client connection to 127.0.0.1:port (stage 09 on):

        with Conn(port) as c:
            r = c.request("GET", "/cl?size=10")     # one request, one framed response
            c.send(raw_bytes)                        # anything, e.g. pipelined requests
            r = c.read_response(head=False)          # the next response
            assert c.closed()                        # the peer closed cleanly

    Requests carry Host (127.0.0.1:PORT unless host= is given) and no
    Connection header unless the caller adds one; source= binds the local
    end to that address (127.0.0.2, ...)."""

    def __init__(self, port, timeout=READ_TIMEOUT, host=None, address=LOOPBACK, nodelay=True, source=None):
        self.port = port
        self.host = host or f"{LOOPBACK}:{port}"
        self.sock = connect(port, timeout=timeout, address=address, source=source)
        if nodelay:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = Reader(self.sock)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def request_bytes(self, method="GET", path="/", headers=(), body=b"", version="1.1"):
        return request_bytes(method, path, headers, body, version, self.host)

    def request(self, method="GET", path="/", headers=(), body=b"", version="1.1"):
        """Sends one request and reads its response (framed; a HEAD's has no body)."""
        self.send(self.request_bytes(method, path, headers, body, version))
        return self.read_response(head=(method == "HEAD"))

    def get(self, path="/", headers=(), version="1.1"):
        return self.request("GET", path, headers, version=version)

    def read_response(self, head=False):
        return read_framed_response(self.reader, head=head)

    def wait_for_data(self, timeout):
        """True if a byte arrived (or is buffered) within `timeout` seconds;
        False if none did, or the connection ended."""
        if self.reader.buf:
            return True
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            return self.reader.fill()
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(old)

    def state(self, timeout=2.0):
        """What the connection does within `timeout` seconds: "data" (bytes
        are buffered or arrive; they stay in the buffer), "eof" (the peer
        closed cleanly), "reset", or "open" (nothing happened)."""
        if self.reader.buf:
            return "data"
        if self.reader.eof:
            return "reset" if self.reader.reset else "eof"
        if self.wait_for_data(timeout):
            return "data"
        if self.reader.eof:
            return "reset" if self.reader.reset else "eof"
        return "open"

    def closed(self, timeout=2.0):
        """True if the peer closed the connection cleanly (a FIN, no byte
        before it) within `timeout` seconds."""
        return self.state(timeout) == "eof"

    def is_open(self, wait=0.1):
        """True if nothing arrived and the connection did not end within
        `wait` seconds (it is still there, idle)."""
        return self.state(wait) == "open"
