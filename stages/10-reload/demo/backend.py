#!/usr/bin/env python3
"""backend.py NAME PORT -- this chapter's demo backend: HTTP/1.1 on
127.0.0.1:PORT, connections kept open, one thread per connection, every
response with an `X-Backend: NAME` header. Quiet (it logs nothing).

  GET /anything           "NAME\\n" (Content-Length framed); ?delay=S waits S s first
  GET /missing            404, "NAME: no such page\\n"
  GET /drip?chunks=N&size=B&delay=S
                          N * B bytes of "x", in N pieces, S seconds apart
  GET /endless            a body that never ends (no length: it ends with the
                          connection), 1000 bytes every 10 ms, for at most 60 s
  POST /anything          reads the body, answers "NAME: got N bytes\\n"
  HEAD                    the GET's head, no body"""
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

name, port = sys.argv[1], int(sys.argv[2])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as most application servers
    server_version = "demo-backend"
    sys_version = ""

    def log_message(self, *args):
        pass

    def head(self, status, length=None, close=False):
        self.send_response(status)
        self.send_header("X-Backend", name)
        self.send_header("Content-Type", "text/plain")
        if length is not None:
            self.send_header("Content-Length", str(length))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()

    def answer(self, status, body):
        self.head(status, len(body))
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if "delay" in query and url.path != "/drip":
            time.sleep(float(query["delay"]))
        if url.path == "/missing":
            self.answer(404, f"{name}: no such page\n".encode())
        elif url.path == "/drip":
            chunks, size = int(query.get("chunks", 10)), int(query.get("size", 1000))
            self.head(200, chunks * size)
            for _ in range(chunks):
                self.wfile.write(b"x" * size)
                self.wfile.flush()
                time.sleep(float(query.get("delay", 0.1)))
        elif url.path == "/endless":
            self.head(200, close=True)
            deadline = time.monotonic() + 60
            try:
                while time.monotonic() < deadline:
                    self.wfile.write(b"x" * 1000)
                    self.wfile.flush()
                    time.sleep(0.01)
            except OSError:
                pass           # the proxy went away: that is the demo's point
        else:
            self.answer(200, f"{name}\n".encode())

    do_HEAD = do_GET

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer(200, f"{name}: got {len(body)} bytes\n".encode())


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
server.serve_forever()
