"""A tiny WSGI application for test_buffering.py, run by gunicorn with
sync workers (one request at a time per worker, as Python and Ruby
application servers commonly are):

    python3 -m gunicorn --workers 2 --worker-class sync --chdir fts buffering_app:app

GET  /pid               the worker's process id (which worker answered)
POST /echo              reads the whole body; answers JSON: its length, its
                        SHA-256, the worker's pid and the framing and Expect
                        headers the request came with
GET  /barrier?dir=PATH&n=N  waits (at most 10 s) until N requests are in
                        this barrier at once, each in a worker of its own;
                        200 "together", or 503 "alone" if they never were
GET  /bytes?n=N         N bytes of the test pattern (pattern.py), with a
                        Content-Length; &accel=no adds X-Accel-Buffering: no
GET  /events?flag=PATH  text/event-stream: the event "one", then, once the
                        file PATH exists (at most 10 s), the event "two"
GET  /stream?flag=PATH&accel=no  the same with text/plain, and with
                        X-Accel-Buffering: no if accel=no
"""

import hashlib
import json
import os
import sys
import time
from urllib.parse import parse_qs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pattern import pattern  # noqa: E402

FLAG_WAIT = 10.0


def _json(start_response, doc, status="200 OK"):
    body = json.dumps(doc).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _wait_for(path):
    """Until the file at path exists, at most FLAG_WAIT seconds."""
    deadline = time.monotonic() + FLAG_WAIT
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def _two_parts(first, second, flag):
    yield first
    _wait_for(flag)
    yield second


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/pid":
        return _json(start_response, {"pid": os.getpid()})
    if path == "/echo":
        digest, length = hashlib.sha256(), 0
        stream = environ["wsgi.input"]
        while True:
            piece = stream.read(65536)
            if not piece:
                break
            digest.update(piece)
            length += len(piece)
        return _json(start_response, {
            "length": length, "sha256": digest.hexdigest(), "pid": os.getpid(),
            "content_length": environ.get("CONTENT_LENGTH"),
            "transfer_encoding": environ.get("HTTP_TRANSFER_ENCODING"),
            "expect": environ.get("HTTP_EXPECT"),
        })
    if path == "/barrier":
        directory, n = query["dir"], int(query["n"])
        mine = os.path.join(directory, f"{os.getpid()}-{time.monotonic_ns()}")
        open(mine, "w").close()
        deadline = time.monotonic() + FLAG_WAIT
        while len(os.listdir(directory)) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        together = len(os.listdir(directory)) >= n
        return _json(start_response, {"together": together}, "200 OK" if together else "503 Alone")
    if path == "/bytes":
        n = int(query["n"])
        headers = [("Content-Type", "application/octet-stream"), ("Content-Length", str(n))]
        if query.get("accel") == "no":
            headers.append(("X-Accel-Buffering", "no"))
        start_response("200 OK", headers)
        return [pattern(n)]
    if path in ("/events", "/stream"):
        headers = [("Content-Type", "text/event-stream" if path == "/events" else "text/plain")]
        if query.get("accel") == "no":
            headers.append(("X-Accel-Buffering", "no"))
        start_response("200 OK", headers)
        return _two_parts(b"data: one\n\n", b"data: two\n\n", query["flag"])
    start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "10")])
    return [b"not found\n"]
