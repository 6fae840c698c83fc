"""Backends the proxy is put in front of, all on 127.0.0.1.

HTTPBackend   an HTTP/1.0 server in threads of the test process: it closes
              the connection after each response, as the early stages need.
KeepAliveBackend  an HTTP/1.1 server on raw sockets that keeps connections
              open and records every request and connection (stage 09).
RawBackend    a bare TCP server whose per-connection behaviour is a function.
BlackHole     a port where connects hang: SYNs are dropped, never answered.
Nginx         a real web server serving a static directory.
"""

import base64
import collections
import grp
import hashlib
import json
import os
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from netutil import LOOPBACK, free_port, wait_until_listening
from pattern import pattern, pattern_chunks

BARRIER_TIMEOUT = 10.0  # /barrier answers 500 if the others never arrive


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def verify_request(self, request, client_address):
        self.backend.count_connection()
        return True

    def handle_error(self, request, client_address):
        # A proxy or client that goes away mid-response is routine here;
        # keep the test output clean and remember what happened.
        self.backend.errors.append(repr(sys.exc_info()[1]))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one response per connection, then close
    timeout = 30                   # socket timeout for reads: nothing hangs forever

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        url = urlsplit(self.path)
        self.query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        backend = self.server.backend
        backend.count_hit(url.path)
        route = getattr(self, "route_" + url.path.strip("/").replace("-", "_"), None)
        if route is None:
            self.answer(404, b"no such test route\n", "text/plain")
        else:
            route()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    # -- helpers --------------------------------------------------------

    def answer(self, status, body, content_type="application/octet-stream"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Backend", self.server.backend.name)
        self.end_headers()
        self.wfile.write(body)

    def answer_json(self, status, obj):
        self.answer(status, json.dumps(obj).encode(), "application/json")

    def start_body(self, length):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("X-Backend", self.server.backend.name)
        self.end_headers()

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def int_arg(self, name, default=None):
        return int(self.query.get(name, default))

    def float_arg(self, name, default=None):
        return float(self.query.get(name, default))

    # -- routes ---------------------------------------------------------

    def route_echo(self):
        """What the backend received: method, path, headers and body."""
        body = self.read_body()
        self.answer_json(200, {
            "backend": self.server.backend.name,
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_base64": base64.b64encode(body).decode(),
            "body_length": len(body),
        })

    def route_bytes(self):
        """n pattern bytes, after a pause of `delay` seconds (default none)."""
        n = self.int_arg("n")
        time.sleep(self.float_arg("delay", 0))
        self.start_body(n)
        for chunk in pattern_chunks(n):
            self.wfile.write(chunk)

    def route_barrier(self):
        """Answers 200 only once n requests are inside at the same time
        (500 if they do not all arrive within BARRIER_TIMEOUT)."""
        try:
            self.server.backend.barrier(self.int_arg("n")).wait()
        except threading.BrokenBarrierError:
            self.server.backend.reset_barrier(self.int_arg("n"))
            self.answer(500, b"barrier timed out\n", "text/plain")
        else:
            self.answer(200, b"all arrived\n", "text/plain")

    def route_drip(self):
        """chunks pieces of size pattern bytes, with a pause before each."""
        chunks, size = self.int_arg("chunks"), self.int_arg("size", 1000)
        delay = self.float_arg("delay", 0.1)
        self.start_body(chunks * size)
        for i in range(chunks):
            time.sleep(delay)
            self.wfile.write(pattern(size, offset=i * size))

    def route_close_mid(self):
        """Announces n bytes, sends the first half, then closes (with a RST
        if rst=1)."""
        n = self.int_arg("n")
        self.start_body(n)
        self.wfile.write(pattern(n // 2))
        if self.int_arg("rst", 0):
            # No FIN first: the real close (when the handler's file objects
            # are closed) sends only a RST.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    def route_healthz(self):
        """A health endpoint: answers with the backend's health_status (200
        unless the test changes it; a list is used in turn, one status per
        request, round and round), and keeps what the request looked like
        in the backend's health_requests."""
        backend = self.server.backend
        backend.note_health_request(self.command, self.path, self.request_version, self.headers.items())
        status = backend.next_health_status()
        self.answer(status, f"health {status}\n".encode(), "text/plain")

    def route_upload(self):
        """Waits `delay` seconds before reading the body (a slow reader),
        then reports how many bytes arrived and their SHA-256. Gives up
        waiting after `patience` seconds without data, so that a body lost
        on the way gives an answer instead of a hang."""
        time.sleep(self.float_arg("delay", 0))
        expected = int(self.headers.get("Content-Length") or 0)
        self.connection.settimeout(self.float_arg("patience", 3))
        digest, received = hashlib.sha256(), 0
        try:
            while received < expected:
                chunk = self.rfile.read1(min(65536, expected - received))
                if not chunk:
                    break
                digest.update(chunk)
                received += len(chunk)
        except socket.timeout:
            pass
        self.connection.settimeout(self.timeout)
        self.answer_json(200, {"received": received, "sha256": digest.hexdigest()})


class HTTPBackend:
    """An HTTP/1.0 test backend named `name` (it reports its name in
    /echo and in an X-Backend header). Counts requests per path in hits,
    and the connections it accepted in connections (a connection that
    carried no request counts there only).

    /healthz answers with health_status (set it to switch the backend's
    health, or to a list of statuses to be used in turn) and records each
    request it got in health_requests: (method, target, version, [(name,
    value), ...])."""

    def __init__(self, name, port=0):
        self.name = name
        self.host = LOOPBACK
        self.hits = collections.Counter()
        self.connections = 0
        self.health_status = 200
        self.health_requests = []
        self._health_turn = 0
        self.errors = []
        self._lock = threading.Lock()
        self._barriers = {}
        self._server = _Server((LOOPBACK, port), _Handler)
        self._server.backend = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name=f"backend-{name}", daemon=True)
        self._thread.start()

    @property
    def total_hits(self):
        with self._lock:
            return sum(self.hits.values())

    def count_hit(self, path):
        with self._lock:
            self.hits[path] += 1

    def count_connection(self):
        with self._lock:
            self.connections += 1

    @property
    def requests(self):
        """The requests answered so far other than health checks (/healthz)."""
        with self._lock:
            return sum(n for path, n in self.hits.items() if path != "/healthz")

    def note_health_request(self, method, target, version, headers):
        with self._lock:
            self.health_requests.append((method, target, version, list(headers)))

    def next_health_status(self):
        with self._lock:
            status = self.health_status
            if isinstance(status, (list, tuple)):
                status = status[self._health_turn % len(status)]
                self._health_turn += 1
            return status

    def barrier(self, n):
        with self._lock:
            if n not in self._barriers:
                self._barriers[n] = threading.Barrier(n, timeout=BARRIER_TIMEOUT)
            return self._barriers[n]

    def reset_barrier(self, n):
        with self._lock:
            self._barriers.pop(n, None)

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __repr__(self):
        return f"<HTTPBackend {self.name} on {self.host}:{self.port}>"


def swallower(got, timeout, closed=None):
    """A RawBackend handler that reads a connection until the proxy closes
    it (or `timeout` seconds pass without a byte), appending the length of
    each read to the list got, then sets closed (a threading.Event) if
    one is given."""

    def swallow(conn, backend):
        conn.settimeout(timeout)
        try:
            while piece := conn.recv(65536):
                got.append(len(piece))
        except OSError:
            pass
        if closed is not None:
            closed.set()

    return swallow


class RawBackend:
    """A TCP server calling handle(conn, backend) in a thread for each
    connection, and closing the connection when it returns. Whatever each
    connection sent is kept in `received` (when the handler records it).
    It listens on 127.0.0.1, or on `address` (IPv6 if it has a colon).
    receive_buffer (SO_RCVBUF) and max_segment (TCP_MAXSEG) are set on the
    listener, so that its connections have them from their first segment:
    a small segment size keeps the peer's send buffer small too (Linux
    sizes it from the segment size), so a backend that reads slowly makes
    the proxy queue bytes of its own."""

    def __init__(self, handle, port=0, address=LOOPBACK, receive_buffer=None, max_segment=None):
        self.host = address
        self.received = []
        self.connections = 0
        self._handle = handle
        self._lock = threading.Lock()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._listener = socket.create_server((address, port), family=family, backlog=128, reuse_port=False)
        if receive_buffer is not None:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        if max_segment is not None:
            self._listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, max_segment)
        self.port = self._listener.getsockname()[1]
        self._stopping = False
        self._thread = threading.Thread(target=self._accept_loop, name="raw-backend", daemon=True)
        self._thread.start()

    def _accept_loop(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # listener closed by stop()
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            conn.settimeout(30)
            try:
                self._handle(conn, self)
            except OSError:
                pass

    def record(self, data):
        with self._lock:
            self.received.append(data)

    def stop(self):
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(timeout=5)


def reply_after_eof(conn, backend):
    """Reads until the peer half-closes, records what came, then answers
    with an HTTP response saying how many bytes it received."""
    chunks = []
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    backend.record(data)
    body = f"received {len(data)} bytes before EOF\n".encode()
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def close_at_once(conn, backend):
    """Accepts and closes without reading or answering."""


def read_head(conn):
    """Reads from conn until the end of a request head (or EOF); returns
    what arrived."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def wait_for_eof(conn):
    """Reads (and drops) whatever comes until the peer closes, or the
    RawBackend's 30 s socket timeout ends the wait."""
    while conn.recv(65536):
        pass


def read_head_then_close(conn, backend):
    """Reads a request head, records it, and closes without answering."""
    backend.record(read_head(conn))


def hold_after_head(conn, backend):
    """Reads a request head, records it, and never answers: waits until
    the peer closes (the proxy gives up)."""
    backend.record(read_head(conn))
    wait_for_eof(conn)


class BlackHole:
    """A loopback port where connects hang: a listener with a backlog of 0
    whose accept queue is filled by a connection nobody accepts, so the
    kernel drops every further SYN (the connecting side retransmits, and
    would wait for minutes). Checked: a probe connect does not complete
    within PROBE seconds."""

    PROBE = 0.3
    FILLERS = 3

    def __init__(self):
        self.host = LOOPBACK
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((LOOPBACK, 0))
        self._listener.listen(0)
        self.port = self._listener.getsockname()[1]
        self._fillers = []
        try:
            for _ in range(self.FILLERS):
                filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._fillers.append(filler)
                filler.setblocking(False)
                filler.connect_ex((LOOPBACK, self.port))
            if self._connects():
                raise RuntimeError(f"port {self.port} with a full accept queue still completes connects")
        except BaseException:
            self.stop()
            raise

    def _connects(self):
        """True if a connect to the port completes within PROBE seconds."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setblocking(False)
            probe.connect_ex((LOOPBACK, self.port))
            _, writable, _ = select.select([], [probe], [], self.PROBE)
            return bool(writable)

    def stop(self):
        for filler in self._fillers:
            filler.close()
        self._listener.close()

    def __repr__(self):
        return f"<BlackHole on {self.host}:{self.port}>"


class Nginx:
    """nginx serving directory `root` on a free loopback port, with every
    file it writes kept in `workdir`, and room for `worker_connections`
    connections at once: up to stage 05 rsp connects to the backend as
    soon as it accepts a client, so a burst of clients that go away at
    once briefly holds thousands of backend connections, and with too few
    nginx would close some still waiting for their request ("worker_connections
    are not enough, reusing connections"), failing clients of the proxy.
    virtual_hosts ({server name: root directory}) adds name-based virtual
    hosts on the same port; `root` is the default server's."""

    BINARY_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")

    @classmethod
    def find_binary(cls):
        for path in cls.BINARY_CANDIDATES:
            if os.access(path, os.X_OK):
                return path
        return shutil.which("nginx")

    def __init__(self, binary, root, workdir, worker_connections=4096, virtual_hosts=None):
        self.host = LOOPBACK
        self.port = free_port()
        servers = "".join(f"    server {{ listen {LOOPBACK}:{self.port}; server_name {name}; root {directory}; }}\n"
                          for name, directory in (virtual_hosts or {}).items())
        self.workdir = workdir
        conf = os.path.join(workdir, "nginx.conf")
        temp = lambda name: os.path.join(workdir, name)  # noqa: E731
        user = pwd.getpwuid(os.getuid()).pw_name
        group = grp.getgrgid(os.getgid()).gr_name
        with open(conf, "w") as f:
            f.write(f"""
daemon off;
master_process off;
worker_processes 1;
user {user} {group};
pid {temp('nginx.pid')};
error_log {temp('error.log')} info;
events {{ worker_connections {worker_connections}; }}
http {{
    access_log {temp('access.log')};
    client_body_temp_path {temp('client_body')};
    proxy_temp_path {temp('proxy')};
    fastcgi_temp_path {temp('fastcgi')};
    uwsgi_temp_path {temp('uwsgi')};
    scgi_temp_path {temp('scgi')};
    types {{ text/html html; application/octet-stream bin; }}
    default_type application/octet-stream;
    server {{
        listen {LOOPBACK}:{self.port};
        root {root};
    }}
{servers}}}
""")
        self._out = open(os.path.join(workdir, "nginx.stderr"), "wb")
        self.process = subprocess.Popen(
            [binary, "-p", workdir, "-e", temp("error.log"), "-c", conf],
            stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._out)
        try:
            wait_until_listening(self.port, self.process, what="nginx")
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{e}; see {workdir}/nginx.stderr and error.log") from None

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()


# -- a backend that records requests byte for byte (stage 06 on) -------------

class _ConnReader:
    """Buffered reads from a socket, for parsing a request by hand."""

    def __init__(self, conn):
        self.conn = conn
        self.data = bytearray()
        self.pos = 0  # bytes of data consumed by the parser

    def _fill(self):
        chunk = self.conn.recv(65536)
        if not chunk:
            raise EOFError
        self.data += chunk

    fill = _fill

    def buffered(self):
        """How many received bytes the parser has not consumed yet."""
        return len(self.data) - self.pos

    def compact(self):
        """Forgets the bytes consumed so far (a long-lived connection)."""
        del self.data[:self.pos]
        self.pos = 0

    def until(self, delimiter):
        """The bytes up to and including the next `delimiter`."""
        while True:
            end = self.data.find(delimiter, self.pos)
            if end != -1:
                end += len(delimiter)
                piece, self.pos = bytes(self.data[self.pos:end]), end
                return piece
            self._fill()

    def exactly(self, n):
        while len(self.data) - self.pos < n:
            self._fill()
        piece, self.pos = bytes(self.data[self.pos:self.pos + n]), self.pos + n
        return piece

    def rest_until_eof(self):
        """Everything the peer sends until it closes."""
        try:
            while True:
                self._fill()
        except (EOFError, ConnectionResetError):
            pass
        return bytes(self.data)


def _read_framed_request(reader):
    """Reads one request from reader: the head, then the body as its
    Content-Length or chunked coding frames it (a strict chunked parser).
    Returns (head, body), body with its chunked framing kept."""
    head = reader.until(b"\r\n\r\n")
    fields = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            fields.setdefault(name.strip().lower(), []).append(value.strip())
    if fields.get(b"transfer-encoding") == [b"chunked"]:
        body = bytearray()
        while True:
            size_line = reader.until(b"\r\n")
            body += size_line
            size = int(size_line[:-2].split(b";")[0], 16)
            if size == 0:
                break
            data = reader.exactly(size + 2)
            if not data.endswith(b"\r\n"):
                raise ValueError("chunk data not followed by CRLF")
            body += data
        while True:  # trailer fields, then the empty line
            line = reader.until(b"\r\n")
            body += line
            if line == b"\r\n":
                return head, bytes(body)
    lengths = fields.get(b"content-length", [b"0"])
    return head, reader.exactly(int(lengths[0]))


def record_request(conn, backend):
    """A RawBackend handler that shows exactly what arrived: it reads one
    request (head, and a body framed by Content-Length or chunked), answers
    200 with JSON {"head": the head as latin-1 text, "body_length",
    "body_sha256"}, half-closes, and then reads on until the peer closes.
    Every byte received on the connection, the request and anything after
    it, is recorded (backend.received). A request it cannot parse gets a
    500 (still recorded)."""
    reader = _ConnReader(conn)
    try:
        head, body = _read_framed_request(reader)
    except EOFError:
        backend.record(bytes(reader.data))
        return
    except ValueError as e:
        answer = json.dumps({"error": str(e)}).encode()
        status = b"500 Internal Server Error"
    else:
        answer = json.dumps({"head": head.decode("latin-1"), "body_length": len(body),
                             "body_sha256": hashlib.sha256(body).hexdigest()}).encode()
        status = b"200 OK"
    try:
        conn.sendall(b"HTTP/1.0 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"X-Backend: recorder\r\n\r\n%s" % (status, len(answer), answer))
        conn.shutdown(socket.SHUT_WR)
    finally:
        backend.record(reader.rest_until_eof())


# -- an HTTP/1.1 backend that keeps connections open (stage 09 on) -------------

def chunked_body(size, chunks, trailer=False):
    """(raw, decoded): what /chunked?size=N&chunks=K[&trailer=1] sends, the
    body on the wire (K chunks of pattern bytes, the last chunk, an
    X-Checksum trailer field if asked) and without its coding."""
    from client import chunked  # the client knows the coding too
    body = pattern(size)
    piece = max(1, -(-size // max(1, chunks)))
    trailers = [("X-Checksum", hashlib.sha256(body).hexdigest()[:16])] if trailer else []
    return chunked(body, [piece] * max(1, chunks), trailers), body


# What /hop sends besides its end-to-end X-End-To-End: the hop-by-hop
# headers a proxy must not pass on (Connection names X-Hop, which is
# therefore hop-by-hop too).
HOP_RESPONSE_HEADERS = [
    ("Connection", "X-Hop"),
    ("X-Hop", "1"),
    ("Keep-Alive", "timeout=5, max=100"),
    ("Proxy-Connection", "keep-alive"),
    ("TE", "trailers"),
    ("Trailer", "X-Checksum"),
    ("Upgrade", "h2c"),
]

# What /bad?kind=K answers: a response whose framing no proxy can trust.
BAD_RESPONSES = {
    "two-content-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "negative-content-length": b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello",
    "garbage-content-length": b"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello",
    "malformed-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "malformed-trailer": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-A : b\r\n\r\n",
    "not-http": b"\x16\x03\x01 this is not an HTTP response\r\n\r\n",
    "chunked-not-last": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "unasked-101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
}


class RequestRecord:
    """One request a KeepAliveBackend received: conn (the id of its TCP
    connection, from 1), index (1 for the first request on that
    connection), method, target, version ("HTTP/1.1"), headers (a list of
    (name, value) as sent), head (the raw bytes), body (decoded), and
    dropped (the backend closed instead of answering: drop_reused)."""

    def __init__(self, conn, index, method, target, version, headers, head):
        self.conn, self.index = conn, index
        self.method, self.target, self.version = method, target, version
        self.headers, self.head = headers, head
        self.body = b""
        self.dropped = False
        self.at = time.monotonic()

    def header(self, name):
        values = [v for n, v in self.headers if n.lower() == name.lower()]
        return values[-1] if values else None

    def header_names(self):
        return [n.lower() for n, _ in self.headers]

    def __repr__(self):
        return f"<request {self.method} {self.target} {self.version} conn {self.conn} #{self.index}>"


class ConnInfo:
    """One TCP connection a KeepAliveBackend accepted: id, requests served,
    opened and closed (monotonic times; closed None while open), and
    closed_by: "peer" (the proxy closed it), "reset" (the proxy reset it),
    "idle" (idle_close), "limit" (max_requests_per_conn), "close" (the
    request said Connection: close or close=1, or the body was
    close-delimited),
    "drop" (drop_reused), "stop" (stop()), or "error: ..."."""

    def __init__(self, ident, sock):
        self.id = ident
        self.sock = sock
        self.requests = 0
        self.opened = time.monotonic()
        self.last_response = None
        self.closed = None
        self.closed_by = None

    def __repr__(self):
        return f"<backend conn {self.id}: {self.requests} requests, closed by {self.closed_by}>"


class KeepAliveBackend:
    """An HTTP/1.1 backend on raw sockets, in threads of the test process,
    that keeps connections open between requests (unless a request says
    Connection: close, or an option below closes them). It counts the TCP
    connections it accepted (connections) and the requests (requests),
    keeps every request it received in `records` (RequestRecord: method,
    target, version, headers, body, and which connection carried it) and
    every connection in `conns` ({id: ConnInfo}). Every response has
    X-Backend (its name), X-Conn (the connection's id) and X-Request (the
    request's number on that connection).

    Routes (the path; anything else answers 200 with "path=TARGET\\n"):
      /cl?size=N                 N pattern bytes with Content-Length
      /chunked?size=N&chunks=K&trailer=1
                                 the same in K chunks (chunked_body()), with
                                 an X-Checksum trailer field if trailer=1
      /close-delimited?size=N    neither Content-Length nor chunked: the
                                 body ends when the backend closes
      /status?code=C             status C (204, 304: no body; 205: an
                                 empty one; others a short body)
      /interim                   a 103 Early Hints (with a Link) first
      /echo                      JSON: method, target, version, headers,
                                 body_length, body_sha256, body (latin-1
                                 text, for bodies up to 64 KiB)
      /hop                       a response with HOP_RESPONSE_HEADERS
      /bad?kind=K                BAD_RESPONSES[K]; the connection stays open
      /delay?seconds=S&size=N    /cl after a pause
      /tagged?tag=T&size=N       N bytes: "tag=T\n", then pattern bytes
      /barrier?n=N&size=S        /cl once N requests wait here at once (each
                                 group of N in turn); if they do not all
                                 come within BARRIER_TIMEOUT, the
                                 connection closes unanswered
    A HEAD gets the head a GET would (Content-Length or chunked) and no
    body. close=1 in any query makes the answer say Connection: close
    (and the backend close after it). A request with Expect: 100-continue and a body gets "100
    Continue" before the backend reads the body. Request bodies may be
    framed by Content-Length or chunked.

    Options: idle_close=S closes a connection that waited S seconds for its
    next request; max_requests_per_conn=N answers the Nth request on a
    connection with Connection: close and closes; drop_reused=("POST",)
    makes a request with one of those methods that arrives on a connection
    that served a request before (a pooled connection) close that
    connection instead of being answered (after at least one byte of its
    body, if it has one, arrived): the backend side of the pooling race;
    each such drop sets the `dropped` event (drop_with_reset: the close
    sends a RST); unix_path=PATH listens on a Unix domain socket at PATH
    instead of a TCP port (host and port are then None)."""

    IDLE_WAIT = 60.0   # s: a guard on waiting for the next request (stop() ends it)

    def __init__(self, name="keepalive", port=0, idle_close=None, max_requests_per_conn=None, drop_reused=(),
                 drop_with_reset=False, unix_path=None):
        self.name = name
        self.host = LOOPBACK
        self.unix_path = unix_path
        self.idle_close = idle_close
        self.max_requests_per_conn = max_requests_per_conn
        self.drop_reused = tuple(m.upper() for m in drop_reused)
        self.drop_with_reset = drop_with_reset
        self.connections = 0
        self.records = []
        self.conns = {}
        self._barriers = {}
        self.errors = []
        self.dropped = threading.Event()
        self._lock = threading.Lock()
        if unix_path is None:
            self._listener = socket.create_server((LOOPBACK, port), backlog=512)
            self.port = self._listener.getsockname()[1]
        else:
            # unix_path: listens on a Unix domain socket there instead (the
            # file stays after stop(), as a crashed server's would).
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(unix_path)
            self._listener.listen(512)
            self.host = self.port = None
        self._thread = threading.Thread(target=self._accept_loop, name=f"keepalive-{name}", daemon=True)
        self._thread.start()

    # -- what the tests look at --------------------------------------------------

    @property
    def requests(self):
        with self._lock:
            return len(self.records)

    def requests_per_connection(self):
        """{connection id: requests it carried}."""
        with self._lock:
            return {c.id: c.requests for c in self.conns.values()}

    def open_connections(self):
        with self._lock:
            return [c for c in self.conns.values() if c.closed is None]

    def requests_for(self, path):
        """The records whose target's path is `path`."""
        with self._lock:
            return [r for r in self.records if urlsplit(r.target).path == path]

    # -- serving -----------------------------------------------------------------

    def _accept_loop(self):
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                info = ConnInfo(self.connections, sock)
                self.conns[info.id] = info
            threading.Thread(target=self._serve, args=(info,), daemon=True).start()

    def _closed(self, info, how):
        with self._lock:
            if info.closed is None:
                info.closed = time.monotonic()
                info.closed_by = how

    def _serve(self, info):
        sock = info.sock
        reader = _ConnReader(sock)
        how = "close"
        try:
            while True:
                reader.compact()
                sock.settimeout(self.idle_close if self.idle_close and info.requests else self.IDLE_WAIT)
                if not reader.buffered():
                    try:
                        reader.fill()
                    except socket.timeout:
                        how = "idle"
                        break
                sock.settimeout(30)
                how = self._one_request(info, reader)
                if how is not None:
                    break
        except EOFError:
            how = "peer"
        except ConnectionResetError:
            how = "reset"
        except OSError as e:
            how = "stop" if info.closed_by == "stop" else f"error: {e!r}"
        except Exception as e:  # a bug in a test route: keep it visible
            self.errors.append(repr(e))
            how = f"error: {e!r}"
        finally:
            self._closed(info, how)
            try:
                sock.close()
            except OSError:
                pass

    def _read_body(self, reader, fields):
        te = fields.get("transfer-encoding", "").lower()
        if te.endswith("chunked"):
            body = bytearray()
            while True:
                size = int(reader.until(b"\r\n")[:-2].split(b";")[0], 16)
                if size == 0:
                    break
                body += reader.exactly(size + 2)[:-2]
            while reader.until(b"\r\n") != b"\r\n":
                pass
            return bytes(body)
        return reader.exactly(int(fields.get("content-length", "0")))

    def _one_request(self, info, reader):
        """Serves one request; returns None to go on, or why the connection ends."""
        head = reader.until(b"\r\n\r\n")
        lines = head[:-4].decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
        fields = {n.lower(): v for n, v in headers}
        has_body = "transfer-encoding" in fields or int(fields.get("content-length", "0") or 0) > 0
        with self._lock:
            info.requests += 1
            record = RequestRecord(info.id, info.requests, method, target, version, headers, head)
            self.records.append(record)
        if method in self.drop_reused and info.requests > 1:
            record.dropped = True
            if has_body and not reader.buffered():
                info.sock.settimeout(2)
                try:
                    reader.fill()
                except socket.timeout:
                    pass
            if self.drop_with_reset:
                info.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.dropped.set()
            return "drop"
        if has_body and fields.get("expect", "").lower() == "100-continue":
            info.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        record.body = self._read_body(reader, fields)
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        closing = ("close" in [t.strip().lower() for t in fields.get("connection", "").split(",")]
                   or query.get("close") == "1")
        limit = self.max_requests_per_conn is not None and info.requests >= self.max_requests_per_conn
        ends = "close" if closing else "limit" if limit else None
        route = getattr(self, "_route_" + url.path.strip("/").replace("-", "_"), self._route_default)
        if url.path.startswith("/") and url.path.count("/") > 1:
            route = self._route_default
        result = route(info, record, query, method == "HEAD", ends is not None)
        info.last_response = time.monotonic()
        return result or ends

    # -- answering ---------------------------------------------------------------

    def _head(self, info, record, status, reason, headers, closing):
        lines = [f"HTTP/1.1 {status} {reason}", f"X-Backend: {self.name}", f"X-Conn: {info.id}",
                 f"X-Request: {record.index}"]
        lines += [f"{n}: {v}" for n, v in headers]
        if closing:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _answer(self, info, record, head_only, closing, body, status=200, reason="OK", headers=()):
        own = [("Content-Type", "application/octet-stream")] if not any(
            n.lower() == "content-type" for n, _ in headers) else []
        headers = own + [("Content-Length", str(len(body)))] + list(headers)
        data = self._head(info, record, status, reason, headers, closing)
        info.sock.sendall(data if head_only else data + body)

    def _route_default(self, info, record, query, head_only, closing):
        self._answer(info, record, head_only, closing, f"path={record.target}\n".encode())

    def _route_cl(self, info, record, query, head_only, closing):
        self._answer(info, record, head_only, closing, pattern(int(query.get("size", 100))))

    def _route_tagged(self, info, record, query, head_only, closing):
        tag = f"tag={query.get('tag', '')}\n".encode()
        self._answer(info, record, head_only, closing,
                     tag + pattern(max(0, int(query.get("size", 100)) - len(tag))))

    def _route_delay(self, info, record, query, head_only, closing):
        time.sleep(float(query.get("seconds", 0.1)))
        self._route_cl(info, record, query, head_only, closing)

    def _route_barrier(self, info, record, query, head_only, closing):
        with self._lock:
            n = int(query.get("n", 2))
            barrier = self._barriers.setdefault(n, threading.Barrier(n, timeout=BARRIER_TIMEOUT))
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return "barrier"  # they did not all come: the connection ends, the test sees it
        self._route_cl(info, record, query, head_only, closing)
        return None

    def _route_chunked(self, info, record, query, head_only, closing):
        raw, _ = chunked_body(int(query.get("size", 1000)), int(query.get("chunks", 3)),
                              query.get("trailer") == "1")
        headers = [("Content-Type", "application/octet-stream"), ("Transfer-Encoding", "chunked")]
        if query.get("trailer") == "1":
            headers.append(("Trailer", "X-Checksum"))
        data = self._head(info, record, 200, "OK", headers, closing)
        info.sock.sendall(data if head_only else data + raw)

    def _route_close_delimited(self, info, record, query, head_only, closing):
        data = self._head(info, record, 200, "OK", [("Content-Type", "application/octet-stream")], False)
        if head_only:
            info.sock.sendall(data)
            return None
        info.sock.sendall(data + pattern(int(query.get("size", 1000))))
        return "close"

    def _route_status(self, info, record, query, head_only, closing):
        code = int(query.get("code", 204))
        reasons = {204: "No Content", 205: "Reset Content", 304: "Not Modified"}
        if code in (204, 304):
            headers = [("ETag", '"v1"')] if code == 304 else []
            info.sock.sendall(self._head(info, record, code, reasons[code], headers, closing))
        elif code == 205:
            self._answer(info, record, head_only, closing, b"", code, reasons[code])
        else:
            self._answer(info, record, head_only, closing, f"status {code}\n".encode(), code, "Test")

    def _route_interim(self, info, record, query, head_only, closing):
        info.sock.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n")
        self._answer(info, record, head_only, closing, b"after the hints\n")

    def _route_echo(self, info, record, query, head_only, closing):
        body = record.body
        answer = {"method": record.method, "target": record.target, "version": record.version,
                  "headers": record.headers, "body_length": len(body),
                  "body_sha256": hashlib.sha256(body).hexdigest(),
                  "conn": info.id, "request": record.index}
        if len(body) <= 65536:
            answer["body"] = body.decode("latin-1")
        self._answer(info, record, head_only, closing, json.dumps(answer).encode(),
                     headers=[("Content-Type", "application/json")])

    def _route_hop(self, info, record, query, head_only, closing):
        self._answer(info, record, head_only, closing, b"hop\n",
                     headers=HOP_RESPONSE_HEADERS + [("X-End-To-End", "kept")])

    def _route_bad(self, info, record, query, head_only, closing):
        info.sock.sendall(BAD_RESPONSES[query["kind"]])
        return None  # stays open: the proxy must not use it again

    def stop(self):
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            conns = list(self.conns.values())
        for info in conns:
            if info.closed is None:
                self._closed(info, "stop")
                try:
                    info.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join(timeout=5)

    def __repr__(self):
        where = f"unix:{self.unix_path}" if self.unix_path else f"{self.host}:{self.port}"
        return f"<KeepAliveBackend {self.name} on {where}>"
