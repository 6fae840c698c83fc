#!/usr/bin/env python3
"""hold.py PORT N MODE [--most|--spread] NAME=PID... -- opens N connections to rsp on
127.0.0.1:PORT, one after another (MODE `one-by-one`: each connects, sends
a GET and reads the whole answer before the next one starts, 30 ms
later) or all at once (MODE `at-once`: N threads connect together, then
each sends its GET), keeps them all open, and counts which worker process
holds each of them. rsp's end of a connection is the socket whose local
port is PORT and whose remote port is the client's (/proc/net/tcp); the
process holding it has that socket's inode among its fds (/proc/PID/fd).
Prints the count of each worker; with --most, whether the busier worker
holds three quarters of them or more; with --spread, whether each holds 20% or more."""
import os
import socket
import sys
import threading
import time

port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
verdict = sys.argv[4] if sys.argv[4].startswith("--") else None
workers = dict(arg.split("=") for arg in sys.argv[4 if verdict is None else 5:])
REQUEST = b"GET / HTTP/1.1\r\nHost: demo\r\n\r\n"


def ask(conn):
    conn.sendall(REQUEST)
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise SystemExit("rsp closed a connection")
        data += chunk


conns = []
if mode == "one-by-one":
    for _ in range(n):
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        ask(conn)
        conns.append(conn)
        time.sleep(0.03)
else:
    ready = threading.Barrier(n)
    lock = threading.Lock()

    def connect():
        ready.wait()
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        with lock:
            conns.append(conn)

    threads = [threading.Thread(target=connect) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for conn in conns:
        ask(conn)

# rsp's end of each connection: local port PORT, remote port the client's.
ours = {conn.getsockname()[1] for conn in conns}
inodes = set()
with open("/proc/net/tcp") as f:
    next(f)
    for line in f:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.rsplit(":", 1)[1], 16) == port and int(remote.rsplit(":", 1)[1], 16) in ours:
            inodes.add(fields[9])
counts = {}
for name, pid in workers.items():
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            held += 1
    counts[name] = held
for conn in conns:
    conn.close()
print(f"{n} connections {mode.replace('-', ' ')}: " +
      ", ".join(f"{name} holds {held}" for name, held in counts.items()))
if verdict == "--most":
    print(f"  the busier worker holds three quarters of them or more: {'yes' if max(counts.values()) * 4 >= n * 3 else 'no'}")
elif verdict == "--spread":
    print(f"  each worker holds 20% of them or more: {'yes' if min(counts.values()) * 5 >= n else 'no'}")
