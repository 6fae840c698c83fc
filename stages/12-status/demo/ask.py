#!/usr/bin/env python3
"""ask.py PORT HOST TARGET [half] -- one GET of TARGET with `Host: HOST`
through rsp on 127.0.0.1:PORT, on a connection of its own; prints
"HOST TARGET: STATUS". With `half`, sends only the first line of the
request head and then nothing more, and prints what rsp answered (and
after how long, rounded to a tenth of a second)."""
import socket
import sys
import time

port, host, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
half = len(sys.argv) > 4 and sys.argv[4] == "half"
request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
    started = time.monotonic()
    conn.sendall(request.split(b"\r\n")[0] + b"\r\n" if half else request)
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
status = data.split(b" ")[1].decode() if data else "no answer"
if half:
    print(f"half a head to {host}, then silence: {status} after {time.monotonic() - started:.1f} s")
else:
    print(f"{host} {target}: {status}")
