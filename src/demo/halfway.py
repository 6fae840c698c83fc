#!/usr/bin/env python3
"""halfway.py PORT -- two clients that stop halfway: one in its request
head, one in its body (for silent.example, whose backend would never
answer anyway). Prints the status line each gets, and when."""
import socket
import sys
import time

port = int(sys.argv[1])
for name, data in [("half a head", b"GET / HTTP/1.1\r\nHost: silent.example\r\n"),
                   ("half a body", b"POST / HTTP/1.1\r\nHost: silent.example\r\n"
                                   b"Content-Length: 10\r\n\r\nhalf")]:
    s = socket.create_connection(("127.0.0.1", port))
    start = time.monotonic()
    s.sendall(data)
    status_line = s.recv(4096).split(b"\r\n")[0].decode()
    print(f"{name + ':':15} {status_line} after {time.monotonic() - start:.1f} s")
    s.close()
