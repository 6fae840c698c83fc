#!/usr/bin/python3
"""bench/clients.py -- the clients bench/run and bench/idle start.

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

  clients.py upload HOST PORT PATH N SIZE RATE SECONDS
      (bench/slow-clients) Opens N connections and sends on each the head of
      a POST for PATH with a body of SIZE bytes (Content-Length), then the
      body at no more than RATE bytes per second per connection for SECONDS
      seconds, and closes them (a body that is finished before then is
      answered and counted in "answered"). Prints "started" once every head
      is sent, and at the end one JSON line {"connections": ..., "bytes":
      ..., "answered": ..., "errors": ...}; "errors" counts connections the
      server closed before their body was sent.

  clients.py hold HOST PORT N idle|partial
      (bench/idle) Opens N connections and sends nothing on them (idle) or
      the start of a request head that never ends (partial: SLOWLORIS_HEAD),
      checks a second later which ones the server has closed, and prints one
      JSON line {"open": ..., "errors": ..., "seconds": ..., "closed_by_server":
      ...}; then waits until stdin is closed (or a line is written to it) and
      resets every connection (SO_LINGER 0: no TIME_WAIT left behind, so that
      the next run finds free ports).

  clients.py shed HOST PORT N TIMEOUT WAIT
      (bench/idle) Opens N connections, each sending SLOWLORIS_HEAD, and
      prints one JSON line when all are open (monotonic times of the first
      and last connect). Then watches them until the server has closed every
      one or WAIT seconds have passed after the last connect's TIMEOUT, and
      prints one JSON line: how many the server closed, when (first, last),
      how late after their own connect + TIMEOUT (percentiles), how many got
      a 408 answer first.

  clients.py paced HOST PORT PATH RATE SECONDS
      (bench/idle) Sends RATE requests a second for PATH, each on a new
      connection (Connection: close), started on a fixed schedule whether or
      not earlier ones have been answered, until stdin is closed (or a line is
      written to it) or SECONDS have passed. Prints "started", and at the end
      one JSON line {"requests": [[scheduled, latency, status], ...],
      "errors": {...}}: the latency runs from the scheduled start (not the
      actual one) to the end of the response, so a client held up is counted
      too. Times are CLOCK_MONOTONIC (time.monotonic()), which bench/idle and
      the other clients share.

Only the Python standard library; run with Debian's /usr/bin/python3.
"""

import errno
import json
import os
import resource
import selectors
import socket
import sys
import time

CONNECT_TIMEOUT = 10.0
RESPONSE_TIMEOUT = 60.0
SLOW_RCVBUF = 16 * 1024
TICK = 0.05
REQUEST_TIMEOUT = 10.0
SLOWLORIS_HEAD = b"GET / HTTP/1.1\r\nHost: a\r\nX-a: "


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
    print(json.dumps({"open": len(sockets), "ok": ok, "errors": errors,
                      "closed_by_server": closed_by_server(sockets)}), flush=True)
    sys.stdin.readline()  # bench/run measures now; a line or EOF ends it
    for s in sockets:
        s.close()


def closed_by_server(sockets):
    """How many of the sockets the server has closed (EOF or reset); any
    bytes it sent (an answer) are left unread."""
    closed = 0
    for s in sockets:
        s.setblocking(False)   # else Python waits for the socket's timeout first
        try:
            if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                closed += 1  # the server ended the connection
        except BlockingIOError:
            pass             # open and silent, as it should be
        except OSError:
            closed += 1
    return closed


def hold(host, port, n, mode):
    raise_fd_limit(n + 64)
    sockets, errors = [], 0
    started = time.monotonic()
    for _ in range(n):
        try:
            s = connect(host, port)
            if mode == "partial":
                s.sendall(SLOWLORIS_HEAD)
            sockets.append(s)
        except OSError:
            errors += 1
    seconds = time.monotonic() - started
    time.sleep(1.0)
    print(json.dumps({"open": len(sockets), "errors": errors, "seconds": seconds,
                      "closed_by_server": closed_by_server(sockets)}), flush=True)
    sys.stdin.readline()  # bench/idle measures now; a line or EOF ends it
    linger = (1).to_bytes(4, sys.byteorder) + (0).to_bytes(4, sys.byteorder)   # struct linger {1, 0}
    for s in sockets:
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        except OSError:
            pass
        s.close()


def percentiles(values, points=(50, 90, 99, 100)):
    """{"p50": ..., ...} of values (nearest rank), or {} if there are none."""
    values = sorted(values)
    if not values:
        return {}
    return {f"p{p}": values[min(len(values) - 1, max(0, -(-p * len(values) // 100) - 1))] for p in points}


def shed(host, port, n, timeout, wait):
    raise_fd_limit(n + 64)
    sel = selectors.DefaultSelector()
    opened = {}           # socket -> [connect time, first bytes received]
    closes = []           # (close time, connect time, answered 408, reset)
    errors = 0

    def watch(poll_timeout):
        for key, _ in sel.select(timeout=poll_timeout):
            s = key.fileobj
            reset = False
            try:
                chunk = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                chunk, reset = b"", True
            if chunk:
                opened[s][1] += chunk[:64 - len(opened[s][1])]
                continue
            now = time.monotonic()
            connected, answer = opened.pop(s)
            closes.append((now, connected, answer.startswith(b"HTTP/1.1 408") or answer.startswith(b"HTTP/1.0 408"),
                           reset))
            sel.unregister(s)
            s.close()

    first = None
    for i in range(n):
        try:
            s = connect(host, port)
            s.sendall(SLOWLORIS_HEAD)
            now = time.monotonic()
            first = first if first is not None else now
            s.setblocking(False)
            opened[s] = [now, b""]
            sel.register(s, selectors.EVENT_READ)
        except OSError:
            errors += 1
        if i % 200 == 199:
            watch(0)  # notice closes while still opening, with the right time
    last = time.monotonic()
    print(json.dumps({"open": len(opened) + len(closes), "errors": errors, "first_connect": first,
                      "last_connect": last}), flush=True)
    end = last + timeout + wait
    while opened and time.monotonic() < end:
        watch(0.05)
    lateness = [close - connected - timeout for close, connected, _, _ in closes]
    result = {"open": len(opened) + len(closes), "errors": errors, "closed": len(closes),
              "still_open": len(opened), "answered_408": sum(1 for c in closes if c[2]),
              "reset": sum(1 for c in closes if c[3]), "first_connect": first, "last_connect": last,
              "first_close": min((c[0] for c in closes), default=None),
              "last_close": max((c[0] for c in closes), default=None),
              "lateness": percentiles(lateness),
              "early": sum(1 for x in lateness if x < -0.05)}
    for s in opened:
        s.close()
    print(json.dumps(result), flush=True)


def paced(host, port, path, rate, seconds):
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin, selectors.EVENT_READ, None)
    data = request(host, port, path, keep_alive=False)
    interval = 1.0 / rate
    start = time.monotonic()
    next_at, end = start, start + seconds
    inflight = {}        # socket -> [scheduled, Response, connected]
    results, errors = [], {}
    stopping = False
    print("started", flush=True)

    def finish(s, error=None):
        scheduled, response, _ = inflight.pop(s)
        sel.unregister(s)
        s.close()
        if error:
            errors[error] = errors.get(error, 0) + 1
        else:
            results.append([scheduled, time.monotonic() - scheduled, response.status])

    while True:
        now = time.monotonic()
        launching = not stopping and now < end
        while launching and next_at <= now:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            code = s.connect_ex((host, port))
            if code not in (0, errno.EINPROGRESS):
                s.close()
                errors[os.strerror(code)] = errors.get(os.strerror(code), 0) + 1
            else:
                inflight[s] = [next_at, Response(), False]
                sel.register(s, selectors.EVENT_WRITE, "request")
            next_at += interval
        if not launching and not inflight:
            break
        for s in [s for s, entry in inflight.items() if now - entry[0] > REQUEST_TIMEOUT]:
            finish(s, f"no complete answer within {REQUEST_TIMEOUT:g} s")
        poll = min(max(0.0, next_at - now), 0.1) if launching else 0.1
        for key, _ in sel.select(timeout=poll):
            if key.data is None:       # stdin: a line or EOF ends the run
                sys.stdin.readline()
                sel.unregister(sys.stdin)
                stopping = True
                continue
            s = key.fileobj
            if s not in inflight:
                continue
            entry = inflight[s]
            if not entry[2]:
                code = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    finish(s, f"connect: {os.strerror(code)}")
                    continue
                try:
                    s.send(data)       # a few dozen bytes into an empty socket buffer
                except OSError as e:
                    finish(s, f"send: {e.strerror}")
                    continue
                entry[2] = True
                sel.modify(s, selectors.EVENT_READ, "request")
                continue
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                finish(s, f"recv: {e.strerror}")
                continue
            if chunk:
                entry[1].feed(chunk)
            if entry[1].complete():
                finish(s)
            elif not chunk:
                finish(s, "closed before the whole answer")
    print(json.dumps({"requests": results, "errors": errors}), flush=True)


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


def upload(host, port, path, n, size, rate, seconds):
    raise_fd_limit(n + 64)
    sockets, errors, answered = [], 0, 0
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
            f"User-Agent: rsp-bench\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {size}\r\n\r\n").encode()
    for _ in range(n):
        try:
            s = connect(host, port)
            s.sendall(head)
            s.setblocking(False)
            sockets.append(s)
        except OSError:
            errors += 1
    print("started", flush=True)
    per_tick = max(1, int(rate * TICK))
    chunk = b"u" * per_tick
    left = {s: size for s in sockets}
    sent = 0
    end = time.monotonic() + seconds
    next_tick = time.monotonic()
    while left and time.monotonic() < end:
        for s in list(left):
            try:
                done = s.send(chunk[:min(per_tick, left[s])])
            except BlockingIOError:
                continue
            except OSError:   # the server closed it before the body was sent
                errors += 1
                del left[s]
                continue
            sent += done
            left[s] -= done
            if left[s] == 0:
                answered += 1
                del left[s]
        next_tick += TICK
        time.sleep(max(0.0, next_tick - time.monotonic()))
    for s in sockets:
        s.close()
    print(json.dumps({"connections": len(sockets), "bytes": sent, "answered": answered, "errors": errors}),
          flush=True)


def main(argv):
    if len(argv) == 6 and argv[1] == "idle":
        idle(argv[2], int(argv[3]), argv[4], int(argv[5]))
    elif len(argv) == 8 and argv[1] == "slow":
        slow(argv[2], int(argv[3]), argv[4], int(argv[5]), int(argv[6]), float(argv[7]))
    elif len(argv) == 9 and argv[1] == "upload":
        upload(argv[2], int(argv[3]), argv[4], int(argv[5]), int(argv[6]), int(argv[7]), float(argv[8]))
    elif len(argv) == 6 and argv[1] == "hold" and argv[5] in ("idle", "partial"):
        hold(argv[2], int(argv[3]), int(argv[4]), argv[5])
    elif len(argv) == 7 and argv[1] == "shed":
        shed(argv[2], int(argv[3]), int(argv[4]), float(argv[5]), float(argv[6]))
    elif len(argv) == 7 and argv[1] == "paced":
        paced(argv[2], int(argv[3]), argv[4], float(argv[5]), float(argv[6]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
