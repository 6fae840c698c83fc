#!/usr/bin/env python3
"""traffic.py PORT HOST RATE... -- GETs through rsp on 127.0.0.1:PORT with
`Host: HOST`: RATE requests, evenly spaced, in each second, one second
per RATE given. Four threads share the requests, each on a keep-alive
connection of its own (the demo backend takes some 40 ms per answer on a
kept-alive connection, so one connection alone could not keep up). Every
tenth request asks for /missing (a 404 from the backend). Prints how many
got each status."""
import collections
import socket
import sys
import threading
import time

port, host, rates = int(sys.argv[1]), sys.argv[2], [int(r) for r in sys.argv[3:]]
THREADS = 4
slots = [second + i / rate for second, rate in enumerate(rates) for i in range(rate)]
statuses = collections.Counter()
lock = threading.Lock()
start = time.monotonic() + 0.1


def client(first):
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    reader = conn.makefile("rb")
    for n in range(first, len(slots), THREADS):
        time.sleep(max(0, start + slots[n] - time.monotonic()))
        path = "/missing" if n % 10 == 9 else "/"
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        status = int(reader.readline().split()[1])
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        reader.read(length)
        with lock:
            statuses[status] += 1
    conn.close()


threads = [threading.Thread(target=client, args=(t,)) for t in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
time.sleep(max(0, start + len(rates) - time.monotonic()))
print(f"{sum(statuses.values())} requests: " + ", ".join(f"{s} {c}" for s, c in sorted(statuses.items())))
