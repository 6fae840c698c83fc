#!/usr/bin/env python3
"""requests.py PORT [PATH] -- without PATH, six requests of different
kinds through rsp, each on its own connection, exactly as written below
(a browser-like GET with a Referer, a page that is not there, a HEAD, a
POST, a request line with a byte that is not ASCII, and a User-Agent
that tries to add fields to the access log line); with PATH, one GET of
PATH. Prints the status of each response, on one line."""
import socket
import sys

port = int(sys.argv[1])
BROWSER = b"Mozilla/5.0 (X11; Linux x86_64) demo"
REQUESTS = [
    b"GET / HTTP/1.1\r\nHost: demo\r\nReferer: http://example.com/blog/\r\nUser-Agent: " + BROWSER + b"\r\n",
    b"GET /missing HTTP/1.1\r\nHost: demo\r\nUser-Agent: curl/8.0\r\n",
    b"HEAD / HTTP/1.1\r\nHost: demo\r\nUser-Agent: curl/8.0\r\n",
    b"POST /form HTTP/1.1\r\nHost: demo\r\nContent-Length: 8\r\n\r\nname=rsp",
    b"GET /caf\xe9 HTTP/1.1\r\nHost: demo\r\n",
    # A client's attempt to forge fields: what would end the User-Agent's
    # quotes, then a status, a size and a quoted field of its own.
    b'GET /login HTTP/1.1\r\nHost: demo\r\nUser-Agent: x" 200 1 "http://bank/" "y\\\tz\r\n',
]
if len(sys.argv) > 2:
    REQUESTS = [f"GET {sys.argv[2]} HTTP/1.1\r\nHost: demo\r\n".encode()]

statuses = []
for request in REQUESTS:
    if b"\r\n\r\n" not in request:
        request += b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        # Connection: close after the other headers (before a POST's body).
        head, _, body = request.partition(b"\r\n\r\n")
        conn.sendall(head + b"\r\nConnection: close\r\n\r\n" + body)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    statuses.append(data.split(b" ")[1].decode() if data else "no answer")
print(f"{len(statuses)} request{'s' if len(statuses) > 1 else ''}, answered: {' '.join(statuses)}")
