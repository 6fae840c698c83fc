#!/usr/bin/env python3
"""pipeline.py PORT -- five GETs sent in one write, before any answer (the
first and the third take the backend a while: ?delay=), the last one
with "Connection: close". Prints the requests, then each response as it
is read back: its status line, its Connection header if any, and its
body; then whether the server closed the connection."""
import socket
import sys

port = int(sys.argv[1])
paths = ["/one?delay=0.3", "/two", "/three?delay=0.1", "/four", "/five"]
requests = b""
for i, path in enumerate(paths):
    last = i == len(paths) - 1
    requests += (f"GET {path} HTTP/1.1\r\nHost: demo.example\r\n"
                 + ("Connection: close\r\n" if last else "") + "\r\n").encode()
conn = socket.create_connection(("127.0.0.1", port))
conn.sendall(requests)
print("one write, five GETs: " + " ".join(paths) + " (Connection: close)")
f = conn.makefile("rb")
for _ in paths:
    status = f.readline().decode().strip()
    if not status:
        print("the connection closed early")
        break
    length, extra = 0, ""
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "connection":
            extra = f"  (Connection:{value.rstrip()})"
    print(f"{status}: {f.read(length).decode().strip()}{extra}")
print("then the connection closed" if f.read() == b"" else "then more bytes came")
