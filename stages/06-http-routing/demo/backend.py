# backend.py NAME PORT -- answers every request with its NAME, the request
# line and every header it received, and the size and SHA-256 of a body.
import hashlib, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

name, port = sys.argv[1], int(sys.argv[2])

class Echo(BaseHTTPRequestHandler):
    server_version, sys_version = "backend.py", ""   # the same Server header everywhere

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        text = f"backend {name}\n{self.requestline}\n"
        text += "".join(f"{k}: {v}\n" for k, v in self.headers.items())
        if body:
            text += f"body: {len(body)} bytes, sha256 {hashlib.sha256(body).hexdigest()}\n"
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
    do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = do_PATCH = answer

    def log_message(self, *args):  # keep the terminal quiet
        pass

ThreadingHTTPServer(("127.0.0.1", port), Echo).serve_forever()
