#!/usr/bin/env python3
"""backend.py PORT DIRECTORY -- this chapter's demo backend: HTTP/1.1 on
127.0.0.1:PORT, connections kept open, serving the files of DIRECTORY
with a Content-Length. Each answer leaves in as few system calls as
Python allows: a small file's head and body in one send, a large file's
head in one send and its body with sendfile(2). So what rsp reads from
it is the same on every run, and only rsp's own calls vary between
stages. Quiet (it logs nothing)."""
import os
import socket
import sys
import threading

port, directory = int(sys.argv[1]), sys.argv[2]


def answer(conn, method, target):
    path = os.path.join(directory, os.path.basename(target.split("?")[0]))
    if not os.path.isfile(path):
        body = b"not found\n"
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return
    size = os.path.getsize(path)
    head = (b"HTTP/1.1 200 OK\r\nServer: demo-backend\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % size)
    if method == "HEAD":
        conn.sendall(head)
    elif size <= 65536:
        with open(path, "rb") as f:
            conn.sendall(head + f.read())
    else:
        conn.sendall(head)
        with open(path, "rb") as f:
            conn.sendfile(f)


def serve(conn):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            method, target, _ = head.split(b"\r\n")[0].decode("latin-1").split(" ")
            answer(conn, method, target)
    except (ConnectionError, ValueError):
        pass
    finally:
        conn.close()


server = socket.create_server(("127.0.0.1", port), backlog=128)
while True:
    connection, _ = server.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
