"""heads.py -- what this chapter's small demo backends share: reading one
request head off a keep-alive connection, and serving every connection
on a thread of its own."""
import socket
import threading


def read_head(conn, buf):
    """Reads from conn until buf holds a whole head (up to the blank line).
    Returns (head, rest): the head without its blank line, and the bytes
    after it (the start of a body or of the next request); or (None, b"")
    if the client closed the connection first."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None, b""
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def serve_forever(port, serve):
    """Accepts connections on 127.0.0.1:port and calls serve(conn) for
    each, on a daemon thread. Never returns."""
    server = socket.create_server(("127.0.0.1", port))
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
