#!/usr/bin/env python3
"""ws_client.py PORT -- through rsp, to ws_backend.py: upgrades a
connection to a WebSocket at /echo, sends three messages (masked, as a
client's frames must be) and prints the echoes, then closes it with a
close frame. Then asks for an upgrade at /private, which is refused, and
sends a plain GET on the same connection."""
import base64
import hashlib
import os
import socket
import sys

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455's example key
port = int(sys.argv[1])


def head(f):
    status = f.readline().decode().strip()
    headers = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip()] = value.strip()
    return status, headers


def send_frame(conn, opcode, payload):
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    conn.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)


def read_frame(f):
    first, second = f.read(2)
    return first & 0x0F, f.read(second & 0x7F)


def upgrade(path):
    return (f"GET {path} HTTP/1.1\r\nHost: demo.example\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode()


conn = socket.create_connection(("127.0.0.1", port))
f = conn.makefile("rb")
conn.sendall(upgrade("/echo"))
status, headers = head(f)
expected = base64.b64encode(hashlib.sha1((KEY + GUID).encode()).digest()).decode()
print(f"GET /echo, Upgrade: websocket -> {status}")
print(f"  Upgrade: {headers.get('Upgrade')}; Connection: {headers.get('Connection')}; "
      f"Sec-WebSocket-Accept {'right' if headers.get('Sec-WebSocket-Accept') == expected else 'WRONG'}")
for message in ["hello", "through rsp", "in both directions"]:
    send_frame(conn, 0x1, message.encode())
    opcode, payload = read_frame(f)
    print(f"  sent {message!r:22} echoed {payload.decode()!r}")
send_frame(conn, 0x8, (1000).to_bytes(2, "big"))
opcode, payload = read_frame(f)
print(f"  close frame sent; one came back (code {int.from_bytes(payload, 'big')}); "
      f"then {'the connection closed' if f.read() == b'' else 'more bytes'}")
conn.close()

conn = socket.create_connection(("127.0.0.1", port))
f = conn.makefile("rb")
conn.sendall(upgrade("/private"))
status, headers = head(f)
f.read(int(headers.get("Content-Length", "0")))
print(f"GET /private, Upgrade: websocket -> {status}"
      + (f" (Connection: {headers['Connection']})" if "Connection" in headers else ""))
conn.sendall(b"GET / HTTP/1.1\r\nHost: demo.example\r\n\r\n")
status, headers = head(f)
body = f.read(int(headers.get("Content-Length", "0")))
print(f"then GET / on the same connection -> {status}: {body.decode().strip()!r}")
conn.close()
