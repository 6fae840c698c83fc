#!/usr/bin/env python3
"""slowloris.py PORT N SECONDS -- N clients that start a request and never
finish it: each sends the first line and one header, and then waits.

Every second it prints how many of the N connections the server still holds
open and how many it answered with 408; it stops when all are closed, or
after SECONDS."""
import selectors
import socket
import sys
import time

port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
selector = selectors.DefaultSelector()
answers = {}
for i in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: www.example.com\r\nX-Slow: ")
    s.setblocking(False)
    selector.register(s, selectors.EVENT_READ)
    answers[s] = b""

start, next_report, open_count = time.monotonic(), 1.0, count
statuses = {}
while open_count > 0 and time.monotonic() - start < seconds:
    for key, _ in selector.select(timeout=0.1):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except ConnectionError:
            data = b""
        if data:
            answers[s] += data
            continue
        status = answers[s][9:12].decode() if answers[s].startswith(b"HTTP/1.1 ") else "no answer"
        statuses[status] = statuses.get(status, 0) + 1
        selector.unregister(s)
        s.close()
        open_count -= 1
    if time.monotonic() - start >= next_report:
        closed = ", ".join(f"{n} {'answered ' + k if k.isdigit() else k}" for k, n in sorted(statuses.items()))
        print(f"after {next_report:.0f} s: {open_count} still open" + (f"; closed: {closed}" if closed else ""))
        next_report += 1
if open_count == 0:
    closed = ", ".join(f"{n} {'answered ' + k if k.isdigit() else k}" for k, n in sorted(statuses.items()))
    print(f"all {count} closed within {next_report:.0f} s; {closed}")
