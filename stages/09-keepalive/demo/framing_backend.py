#!/usr/bin/env python3
"""framing_backend.py PORT -- an HTTP/1.1 backend on 127.0.0.1 that frames
each answer its own way, by path (the body is "hello" every time):

  /length    Content-Length: 6
  /chunked   Transfer-Encoding: chunked, in two chunks
  /close     no length at all: the body ends when the connection closes
  /empty     204 No Content, which has no body
  /early     103 Early Hints first, then a 200 with Content-Length: 6
A HEAD gets the head of the GET alone. The connection stays open for the
next request, except after /close."""
import sys

from heads import read_head, serve_forever

port = int(sys.argv[1])
answers = {
    "/length": b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n",
    "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"3\r\nhel\r\n3\r\nlo\n\r\n0\r\n\r\n",
    "/close": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello\n",
    "/empty": b"HTTP/1.1 204 No Content\r\n\r\n",
    "/early": b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
              b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n",
}


def serve(conn):
    buf = b""
    with conn:
        while True:
            head, buf = read_head(conn, buf)
            if head is None:
                return
            method, path = head.decode("latin-1").split(" ")[:2]
            answer = answers.get(path, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            if method == "HEAD":
                answer = answer.split(b"\r\n\r\n")[0] + b"\r\n\r\n"
            conn.sendall(answer)
            if path == "/close":
                return


serve_forever(port, serve)
