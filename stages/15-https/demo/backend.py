#!/usr/bin/env python3
"""backend.py NAME PORT -- this chapter's demo backend: HTTP/1.1 on
127.0.0.1:PORT, connections kept open. Every answer is text that says
which backend answered, the request line, and what rsp told it about the
client's connection (X-Forwarded-Proto, Forwarded); for a POST, how many
bytes of body it got. Quiet (it logs nothing)."""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

name, port = sys.argv[1], int(sys.argv[2])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "demo-backend"
    sys_version = ""

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = (f"backend {name}: {self.requestline}\n"
                f"  X-Forwarded-Proto: {self.headers.get('X-Forwarded-Proto')}\n"
                f"  Forwarded: {self.headers.get('Forwarded')}\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET

    def do_POST(self):
        got = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = f"backend {name}: {self.requestline}, {len(got)} bytes of body\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
server.serve_forever()
