#!/usr/bin/env python3
"""framing.py PORT -- requests for framing_backend.py's paths, on as few
connections as the server allows. For each: the status line(s), the
framing headers the client got (Content-Length, Transfer-Encoding,
Connection), the body as the client reads it, and whether the connection
is still open a moment later (a new one is opened when it is not)."""
import json
import select
import socket
import sys

port = int(sys.argv[1])
tries = [("GET", "/length", "1.1"), ("HEAD", "/length", "1.1"), ("GET", "/chunked", "1.1"),
         ("GET", "/empty", "1.1"), ("GET", "/early", "1.1"), ("GET", "/close", "1.1"),
         ("GET", "/length", "1.0"), ("GET", "/chunked", "1.0")]
conn = f = None
for method, path, version in tries:
    if conn is None:
        conn = socket.create_connection(("127.0.0.1", port))
        f = conn.makefile("rb")
    keep = "Connection: keep-alive\r\n" if version == "1.0" else ""
    conn.sendall(f"{method} {path} HTTP/{version}\r\nHost: demo.example\r\n{keep}\r\n".encode())
    statuses = []
    while True:
        status = f.readline().decode().split(" ", 1)[1].strip()
        headers = {}
        while (line := f.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        statuses.append(status)
        if not status.startswith("1"):
            break
    framing = [f"{n}: {headers[n.lower()]}" for n in ("Content-Length", "Transfer-Encoding", "Connection")
               if n.lower() in headers]
    if method == "HEAD" or status.startswith(("1", "204", "304")):
        body = b""
    elif headers.get("transfer-encoding") == "chunked":
        body = b""
        while (size := int(f.readline(), 16)) > 0:
            body += f.read(size)
            f.readline()
        f.readline()
    elif "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    else:
        body = f.read()
    if select.select([conn], [], [], 0.1)[0] and conn.recv(1) == b"":
        conn.close()
        conn = None
    request = f"{method} {path} (HTTP/{version}{', keep-alive' if keep else ''})"
    print(f"{request:35} {', then '.join(statuses)}")
    shown = json.dumps(body.decode()) if body else "none"
    print(f"    {'; '.join(framing) or 'no framing header'}; body {shown}; "
          f"{'connection open' if conn else 'connection closed'}")
