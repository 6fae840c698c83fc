#!/usr/bin/env python3
"""backend.py NAME PORT [MODE] -- a small HTTP/1.0 backend on 127.0.0.1.

MODE is one of:
  ok        (default) answers every GET with "backend NAME"; GET /healthz
            answers with the status written in the file NAME.health in the
            current directory (200 when there is no such file)
  silent    accepts, reads the request, and never answers
  blackhole listens with a full accept queue, so that the kernel drops new
            SYNs: a connect to it hangs, like one to a host that vanished"""
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

name, port = sys.argv[1], int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "ok"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        status, body = 200, f"backend {name}\n".encode()
        if self.path == "/healthz":
            try:
                with open(f"{name}.health") as f:
                    status = int(f.read())
            except FileNotFoundError:
                pass
            body = f"{status}\n".encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if mode == "ok":
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
elif mode == "silent":
    server = socket.create_server(("127.0.0.1", port))
    held = []
    while True:
        conn, _ = server.accept()
        held.append(conn)  # read nothing back, answer nothing, close nothing
elif mode == "blackhole":
    server = socket.socket()
    server.bind(("127.0.0.1", port))
    server.listen(0)
    # Fill the accept queue (it holds backlog + 1) with connections nobody
    # accepts; after that, the kernel drops every new SYN.
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    time.sleep(3600)
