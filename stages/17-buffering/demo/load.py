#!/usr/bin/env python3
"""load.py PORT PATH N keepalive|close GO END -- a client that makes N
requests for PATH at 127.0.0.1:PORT, one at a time, while someone counts
what rsp does. `keepalive`: all on one connection; `close`: each on a
new connection, with Connection: close. First a few requests to warm
up (rsp's pooled backend connection is then open), then "ready"; the N
requests wait until the file GO exists, and after them the client says
"done" and keeps its connection until the file END exists, so that only
the N requests fall between the two. Every answer must be a 200 with
the whole body, or the client stops with an error."""
import os
import socket
import sys
import time

port, path, count, mode, go, end = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4],
                                    sys.argv[5], sys.argv[6])
request = f"GET {path} HTTP/1.1\r\nHost: demo\r\n".encode()
request += b"Connection: close\r\n\r\n" if mode == "close" else b"\r\n"


def wait_for(name):
    deadline = time.monotonic() + 20
    while not os.path.exists(name):
        if time.monotonic() > deadline:
            sys.exit(f"load.py: {name} never came")
        time.sleep(0.01)


def get(s):
    """Sends the request on s and reads the whole answer."""
    s.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("load.py: the connection closed before an answer")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200 "):
        sys.exit(f"load.py: {head.splitlines()[0].decode()}")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("load.py: the body was cut short")
        body += chunk
    if mode == "close" and s.recv(1) != b"":
        sys.exit("load.py: rsp kept a Connection: close connection open")


def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


if mode == "keepalive":
    s = connect()
    for _ in range(10):
        get(s)
    print("ready", flush=True)
    wait_for(go)
    for _ in range(count):
        get(s)
    print(f"done: {count} requests", flush=True)
    wait_for(end)
    s.close()
else:
    for _ in range(3):
        with connect() as s:
            get(s)
    print("ready", flush=True)
    wait_for(go)
    for _ in range(count):
        with connect() as s:
            get(s)
    print(f"done: {count} requests", flush=True)
    wait_for(end)
