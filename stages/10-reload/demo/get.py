#!/usr/bin/env python3
"""get.py PORT PATH [LABEL] -- one GET through rsp (Connection: close);
prints "LABEL: STATUS from BACKEND, N bytes" (LABEL is "GET PATH" unless
given), BACKEND being the response's X-Backend header, or "rsp" when there
is none; or what went wrong."""
import socket
import sys

port, path = int(sys.argv[1]), sys.argv[2]
label = sys.argv[3] if len(sys.argv) > 3 else f"GET {path}"
try:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
except OSError as e:
    print(f"{label}: {e.strerror or e}")
    sys.exit(0)
head, _, body = data.partition(b"\r\n\r\n")
lines = head.decode("latin-1").split("\r\n")
backend = "rsp"
for line in lines[1:]:
    key, _, value = line.partition(":")
    if key.strip().lower() == "x-backend":
        backend = value.strip()
print(f"{label}: {lines[0].split(' ')[1]} from {backend}, {len(body)} bytes")
