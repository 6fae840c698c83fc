"""A tiny HTTP client over raw sockets, to control exactly what the proxy sees.

The proxy of the early stages does not understand HTTP: it relays bytes
until the backend closes. So every request says `Connection: close` and
every response is read until end of file.
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
    reset is True if the connection ended with a reset instead of a FIN."""

    def __init__(self, raw, reset=False):
        self.raw = raw
        self.reset = reset
        self.status = None
        self.reason = None
        self.headers = []
        self.body = b""
        head, sep, body = raw.partition(b"\r\n\r\n")
        if not sep:
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            return
        self.status = int(parts[1])
        self.reason = parts[2] if len(parts) > 2 else ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers.append((name.strip(), value.strip()))
        self.body = body

    def header(self, name):
        """The last value of header `name` (case-insensitive), or None."""
        values = [v for n, v in self.headers if n.lower() == name.lower()]
        return values[-1] if values else None

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<Response status={self.status} raw={len(self.raw)} bytes body={len(self.body)} bytes reset={self.reset}>"


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
            timeout=READ_TIMEOUT, host=None):
    """Sends one request to 127.0.0.1:port and reads the answer until EOF.

    host: the Host header's value (default 127.0.0.1:PORT).
    half_close: shutdown(SHUT_WR) right after sending the request.
    pause_before_read: sleep this long before the first read.
    rcvbuf, read_size, read_delay: make the client a slow reader."""
    with connect(port, rcvbuf=rcvbuf, timeout=timeout) as sock:
        sock.sendall(build_request(port, method, path, headers, body, host))
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        if pause_before_read:
            time.sleep(pause_before_read)
        return read_response(sock, read_size=read_size, read_delay=read_delay)


def get(port, path="/", **options):
    return request(port, path, **options)


def exchange(port, data, **where):
    """Sends `data`, bytes exactly as given, on a new connection to `port`
    and reads the answer until EOF; returns the Response. `where`: address,
    source, timeout, as for connect()."""
    with connect(port, **where) as sock:
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

