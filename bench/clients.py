#!/usr/bin/python3
"""bench/clients.py -- the two memory-test clients bench/run starts.

  clients.py idle HOST PORT PATH N
      Opens N connections, sends one HTTP/1.1 keep-alive GET for PATH on
      each and reads the whole response, then keeps every connection open
      and idle. A second later it checks which ones the server has closed
      since, and prints one JSON line {"open": ..., "ok": ..., "errors": ...,
      "closed_by_server": ...}; then it waits until stdin is closed (or a
      line is written to it) and closes everything.

  clients.py slow HOST PORT PATH N RATE SECONDS
      Opens N connections with a small receive buffer and sends a GET for
      PATH (a big file) on each, then reads each response at no more than
      RATE bytes per second per connection for SECONDS seconds, and closes
      them. Prints "started" once every request is sent, and at the end one
      JSON line {"connections": ..., "bytes": ..., "errors": ...}.

Only the Python standard library; run with Debian's /usr/bin/python3.
"""

import json
import resource
import selectors
import socket
import sys
import time

CONNECT_TIMEOUT = 10.0
RESPONSE_TIMEOUT = 60.0
SLOW_RCVBUF = 16 * 1024
TICK = 0.05


def raise_fd_limit(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    if new < wanted:
        sys.exit(f"clients.py: need {wanted} file descriptors, the hard limit (ulimit -Hn) is {hard}")


def request(host, port, path, keep_alive):
    connection = "keep-alive" if keep_alive else "close"
    return (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Connection: {connection}\r\nUser-Agent: rsp-bench\r\n\r\n").encode()


def connect(host, port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(CONNECT_TIMEOUT)
    s.connect((host, port))
    return s


class Response:
    """Just enough HTTP/1.1 response parsing to know when a body with a
    Content-Length has arrived completely."""

    def __init__(self):
        self.data = b""
        self.length = None   # of head + body, once the head is in
        self.status = None

    def feed(self, chunk):
        self.data += chunk
        if self.length is None and b"\r\n\r\n" in self.data:
            head, _, _ = self.data.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            self.status = int(lines[0].split()[1])
            body = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    body = int(value.strip())
            self.length = len(head) + 4 + body

    def complete(self):
        return self.length is not None and len(self.data) >= self.length


def idle(host, port, path, n):
    raise_fd_limit(n + 64)
    sockets, errors = [], 0
    for _ in range(n):
        try:
            sockets.append(connect(host, port))
        except OSError:
            errors += 1
    sel = selectors.DefaultSelector()
    data = request(host, port, path, keep_alive=True)
    pending = {}
    for s in sockets:
        try:
            s.sendall(data)
        except OSError:
            errors += 1
            continue
        s.setblocking(False)
        pending[s] = Response()
        sel.register(s, selectors.EVENT_READ)
    ok = 0
    deadline = time.monotonic() + RESPONSE_TIMEOUT
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            response = pending[s]
            if chunk:
                response.feed(chunk)
            if not chunk or response.complete():
                sel.unregister(s)
                del pending[s]
                if chunk and 200 <= (response.status or 0) < 300:
                    ok += 1
                else:
                    errors += 1
    errors += len(pending)
    time.sleep(1.0)
    closed = 0
    for s in sockets:
        try:
            if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                closed += 1  # the server ended the connection: no keep-alive
        except BlockingIOError:
            pass             # open and idle, as it should be
        except OSError:
            closed += 1
    print(json.dumps({"open": len(sockets), "ok": ok, "errors": errors, "closed_by_server": closed}), flush=True)
    sys.stdin.readline()  # bench/run measures now; a line or EOF ends it
    for s in sockets:
        s.close()


def slow(host, port, path, n, rate, seconds):
    raise_fd_limit(n + 64)
    sockets, errors = [], 0
    data = request(host, port, path, keep_alive=False)
    for _ in range(n):
        try:
            s = connect(host, port, rcvbuf=SLOW_RCVBUF)
            s.sendall(data)
            s.setblocking(False)
            sockets.append(s)
        except OSError:
            errors += 1
    print("started", flush=True)
    per_tick = max(1, int(rate * TICK))
    received = 0
    live = set(sockets)
    end = time.monotonic() + seconds
    next_tick = time.monotonic()
    while live and time.monotonic() < end:
        for s in list(live):
            try:
                chunk = s.recv(per_tick)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:  # closed early: a 100 MiB body cannot end this soon
                errors += 1
                live.discard(s)
            received += len(chunk)
        next_tick += TICK
        time.sleep(max(0.0, next_tick - time.monotonic()))
    for s in sockets:
        s.close()
    print(json.dumps({"connections": len(sockets), "bytes": received, "errors": errors}), flush=True)


def main(argv):
    if len(argv) == 6 and argv[1] == "idle":
        idle(argv[2], int(argv[3]), argv[4], int(argv[5]))
    elif len(argv) == 8 and argv[1] == "slow":
        slow(argv[2], int(argv[3]), argv[4], int(argv[5]), int(argv[6]), float(argv[7]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
