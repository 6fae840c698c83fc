#!/usr/bin/env python3
"""load.py PORT SECONDS -- GETs through rsp for SECONDS, from four clients
at once: two keep their connection open from one request to the next
(opening a new one only when the server closes theirs), two open a new
connection for every request. A request counts as done when it got a
whole 200 from a backend of this chapter (demo/backend.py: the body is
the backend's name and a newline, named again in X-Backend); anything
else (an error status, a reset, a short body, a refused connection) is
a failure. Prints how many were done and failed, and which backends
answered how many."""
import collections
import socket
import sys
import threading
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
lock = threading.Lock()
done, failures, served = [0], [], collections.Counter()
deadline = time.monotonic() + seconds


def read_response(f):
    """Reads one response; returns (status, backend, body, server_closes)."""
    status_line = f.readline()
    if not status_line:
        raise ConnectionError("closed before answering")
    status, headers = int(status_line.split()[1]), {}
    while (line := f.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    body = f.read(int(headers.get("content-length", 0)))
    return status, headers.get("x-backend"), body, "close" in headers.get("connection", "").lower()


def client(number, keep):
    conn = f = None
    n = 0
    while time.monotonic() < deadline:
        n += 1
        try:
            if conn is None:
                conn = socket.create_connection(("127.0.0.1", port), timeout=10)
                f = conn.makefile("rb")
            close = "" if keep else "Connection: close\r\n"
            conn.sendall(f"GET /?client={number}&n={n} HTTP/1.1\r\nHost: demo\r\n{close}\r\n".encode())
            status, backend, body, closes = read_response(f)
            if status != 200 or backend is None or body != f"{backend}\n".encode():
                raise ValueError(f"status {status}, body {body[:60]!r}")
            with lock:
                done[0] += 1
                served[backend] += 1
        except (OSError, ValueError, IndexError) as e:
            with lock:
                failures.append(f"client {number}, request {n}: {e!r}")
            closes = True
        if (closes or not keep) and conn is not None:
            conn.close()
            conn = None
    if conn is not None:
        conn.close()


threads = [threading.Thread(target=client, args=(i, i < 2)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"load: {done[0]} requests done, {len(failures)} failed")
for failure in failures[:5]:
    print("  " + failure)
print("answered by: " + ", ".join(f"{b} {served[b]}" for b in sorted(served)))
