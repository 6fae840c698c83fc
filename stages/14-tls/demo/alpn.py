#!/usr/bin/env python3
"""alpn.py PORT NAME CA PROTOCOLS -- a TLS handshake with 127.0.0.1:PORT
(SNI NAME, trusting only the certificate CA) offering the ALPN
protocols PROTOCOLS (comma-separated, e.g. "h2" or "h2,http/1.1"); says
which protocol the server chose, then sends an HTTP/1.1 GET / over the
connection and prints the status line."""
import socket
import ssl
import sys

port, name, ca, offered = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(",")
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(offered)
try:
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                         server_hostname=name) as s:
        chosen = s.selected_alpn_protocol()
        print(f"offered {', '.join(offered)}: {s.version()}, protocol chosen: {chosen or 'none'}")
        s.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        print("  GET / over it:", reply.split(b"\r\n", 1)[0].decode())
except (OSError, ssl.SSLError) as e:
    print(f"offered {', '.join(offered)}: the handshake failed: {e}")
