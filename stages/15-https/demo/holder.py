#!/usr/bin/env python3
"""holder.py PORT NAME CA GO -- a client that lives through a reload of
rsp's certificates. It opens a keep-alive HTTPS connection to
127.0.0.1:PORT (SNI NAME, trusting only CA) and asks for /, keeps the
connection and its session ticket, prints "ready" and waits until the
file GO exists (15 s at most: the reload happens meanwhile). Then it
asks for / again on the same connection, opens a new one, and opens a
third that offers the ticket from before the reload. For each it says
which certificate it saw (its subject's O field)."""
import os
import socket
import ssl
import sys
import time

port, name, ca, go = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3


def connect(session=None):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname=name,
                        session=session)
    s.settimeout(5)
    return s


def organization(s):
    subject = dict(pair[0] for pair in s.getpeercert()["subject"])
    return f"O={subject['organizationName']}"


def get(s):
    """GET / on s, kept alive; returns the status line and which backend answered."""
    s.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += s.recv(65536)
    status = head.split(b"\r\n")[0].decode()
    return f"{status}, {body.decode().split(':')[0]}"


first = connect()
print(f"connection 1: certificate {organization(first)}; GET /: {get(first)}")
ticket = first.session   # TLS 1.3 sends its tickets after the handshake: read by now
print("ready", flush=True)
deadline = time.monotonic() + 15
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
print(f"connection 1 again (opened before the reload): GET /: {get(first)}")
with connect() as second:
    print(f"connection 2 (new): certificate {organization(second)}; GET /: {get(second)}")
with connect(ticket) as third:
    print(f"connection 3 (new, with connection 1's ticket): resumed: "
          f"{'yes' if third.session_reused else 'no'}, certificate {organization(third)}; GET /: {get(third)}")
first.close()
