#!/usr/bin/env python3
"""ws_backend.py PORT -- an HTTP/1.1 backend on 127.0.0.1 with a WebSocket
echo (RFC 6455) at /echo: it accepts the upgrade (101, with
Sec-WebSocket-Accept = base64(sha1(key + GUID))), then sends every text
message back, unmasked as a server's frames are, until a close frame,
which it answers with one of its own before closing. An upgrade to any
other path is refused with a 403; a plain GET gets "hello". Connections
stay open for the next request."""
import base64
import hashlib
import sys

from heads import read_head, serve_forever

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
port = int(sys.argv[1])


def recv_exact(conn, buf, n):
    while len(buf) < n:
        data = conn.recv(65536)
        if not data:
            raise ConnectionError("closed")
        buf += data
    return buf[:n], buf[n:]


def frame(opcode, payload):
    return bytes([0x80 | opcode, len(payload)]) + payload  # short payloads only


def echo(conn, buf):
    while True:
        head, buf = recv_exact(conn, buf, 2)
        opcode, length = head[0] & 0x0F, head[1] & 0x7F
        if length >= 126:
            raw, buf = recv_exact(conn, buf, 2 if length == 126 else 8)
            length = int.from_bytes(raw, "big")
        mask, buf = recv_exact(conn, buf, 4) if head[1] & 0x80 else (b"\0\0\0\0", buf)
        payload, buf = recv_exact(conn, buf, length)
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        if opcode == 0x8:
            conn.sendall(frame(0x8, payload[:2]))
            return
        if opcode == 0x9:
            conn.sendall(frame(0xA, payload))
        elif opcode == 0x1:
            conn.sendall(frame(0x1, payload))


def serve(conn):
    buf = b""
    with conn:
        try:
            while True:
                head, buf = read_head(conn, buf)
                if head is None:
                    return
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                upgrade = headers.get("upgrade", "").lower() == "websocket"
                if upgrade and path == "/echo":
                    key = headers.get("sec-websocket-key", "")
                    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
                    conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                  f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").encode())
                    echo(conn, buf)
                    return
                body = b"no WebSocket here\n" if upgrade else b"hello\n"
                status = "403 Forbidden" if upgrade else "200 OK"
                conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        except ConnectionError:
            pass


serve_forever(port, serve)
