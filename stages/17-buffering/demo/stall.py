#!/usr/bin/env python3
"""stall.py PORT PATH BYTES GO -- a client that stops reading. It asks
127.0.0.1:PORT for PATH, reads the first BYTES bytes of the answer,
prints how many it has, and then reads nothing more until the file GO
exists (15 s at most); then it hangs up without reading the rest."""
import os
import socket
import sys
import time

port, path, want, go = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)   # before connect: a small window
s.settimeout(10)
s.connect(("127.0.0.1", port))
s.sendall(f"GET {path} HTTP/1.1\r\nHost: demo\r\n\r\n".encode())
got = 0
while got < want:
    data = s.recv(min(65536, want - got))
    if not data:
        sys.exit("stall.py: the connection closed early")
    got += len(data)
print(f"read {got} bytes, then stopped reading", flush=True)
deadline = time.monotonic() + 15
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
s.close()
