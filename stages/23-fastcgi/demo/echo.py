# echo.py PORT -- a backend that answers every request with the headers
# that name its client (X-Forwarded-For, X-Real-IP, Forwarded), and logs
# one line per request to stderr, so a demo can count what reached it.
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAMES = ("X-Forwarded-For", "X-Real-IP", "Forwarded")


class Echo(BaseHTTPRequestHandler):
    server_version, sys_version = "echo.py", ""   # the same Server header everywhere

    def do_GET(self):
        text = "".join(f"{name}: {self.headers[name]}\n" for name in NAMES if name in self.headers)
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_request(self, code="-", size="-"):
        sys.stderr.write(f"{self.command} {self.path}\n")
        sys.stderr.flush()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Echo).serve_forever()
