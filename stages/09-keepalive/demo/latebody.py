#!/usr/bin/env python3
"""latebody.py PORT WAIT -- waits WAIT seconds, then sends a POST whose
5-byte body comes 0.1 s after its head, and prints the status line it
gets."""
import socket
import sys
import time

port, wait = int(sys.argv[1]), float(sys.argv[2])
time.sleep(wait)
conn = socket.create_connection(("127.0.0.1", port))
conn.sendall(b"POST /form HTTP/1.1\r\nHost: demo.example\r\nContent-Length: 5\r\n\r\n")
time.sleep(0.1)
try:
    conn.sendall(b"hello")
except OSError:
    pass
status = conn.makefile("rb").readline().decode().strip()
print(f"POST /form, body 0.1 s after the head: {status or 'no answer'}")
