"""Backends the proxy is put in front of, all on 127.0.0.1.

HTTPBackend   an HTTP/1.0 server in threads of the test process: it closes
              the connection after each response, as the early stages need.
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


class RawBackend:
    """A TCP server calling handle(conn, backend) in a thread for each
    connection, and closing the connection when it returns. Whatever each
    connection sent is kept in `received` (when the handler records it).
    It listens on 127.0.0.1, or on `address` (IPv6 if it has a colon)."""

    def __init__(self, handle, port=0, address=LOOPBACK):
        self.host = address
        self.received = []
        self.connections = 0
        self._handle = handle
        self._lock = threading.Lock()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._listener = socket.create_server((address, port), family=family, backlog=128, reuse_port=False)
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
