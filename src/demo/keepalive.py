#!/usr/bin/env python3
"""keepalive.py PORT COUNT [CONNECTIONS [GAP [DELAY]]] -- COUNT HTTP/1.1
GETs (/1, /2, ...), shared out over CONNECTIONS clients (1 by default)
that start together and run at the same time, each waiting GAP seconds (0
by default) between two of its requests. With DELAY, the requests ask
backend11.py to take DELAY seconds over each answer (?delay=DELAY).

Each client keeps its connection for the next request, and opens a new one
only when the server closed it (it said "Connection: close", or its answer
ended with the connection). Responses are read by their Content-Length.
Prints how many requests were answered, how many failed, and how many
connections the clients had to open."""
import socket
import sys
import threading
import time

port, count = int(sys.argv[1]), int(sys.argv[2])
clients = int(sys.argv[3]) if len(sys.argv) > 3 else 1
gap = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
query = f"?delay={sys.argv[5]}" if len(sys.argv) > 5 else ""
start = threading.Barrier(clients)
lock = threading.Lock()
tally = {"answered": 0, "errors": 0, "connections": 0}


def add(key):
    with lock:
        tally[key] += 1


def read_response(f):
    """Reads one response; returns (status, server_closes)."""
    status_line = f.readline()
    if not status_line:
        raise ConnectionError("closed before answering")
    status = int(status_line.split()[1])
    length, closes = None, status_line.startswith(b"HTTP/1.0")
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "connection":
            closes = "close" in value if not status_line.startswith(b"HTTP/1.0") else "keep-alive" not in value
    if length is None:
        f.read()            # no length: the body ends with the connection
        return status, True
    f.read(length)
    return status, closes


def client(paths):
    conn = f = None
    start.wait()
    for i, path in enumerate(paths):
        if i > 0:
            time.sleep(gap)
        try:
            if conn is None:
                conn = socket.create_connection(("127.0.0.1", port))
                f = conn.makefile("rb")
                add("connections")
            conn.sendall(f"GET {path} HTTP/1.1\r\nHost: demo.example\r\n\r\n".encode())
            status, closes = read_response(f)
            add("answered" if status == 200 else "errors")
        except (OSError, ValueError, IndexError):
            add("errors")
            closes = True
        if closes:
            conn.close()
            conn = None
    if conn is not None:
        conn.close()


paths = [f"/{i + 1}{query}" for i in range(count)]
threads = [threading.Thread(target=client, args=(paths[c::clients],)) for c in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"{count} requests: {tally['answered']} answered 200, {tally['errors']} failed; "
      f"client connections opened: {tally['connections']}")
