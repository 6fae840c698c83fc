"""The demo's application, for gunicorn with sync workers (one request at
a time per worker): GET / answers "hello"; POST /upload reads the whole
body and answers how many bytes it got."""


def app(environ, start_response):
    if environ["PATH_INFO"] == "/upload":
        body = environ["wsgi.input"].read()
        text = f"got {len(body)} bytes\n".encode()
    else:
        text = b"hello\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(text)))])
    return [text]
