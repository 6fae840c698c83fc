#!/usr/bin/env python3
"""backend11.py PORT [--idle-close S | --lazy-close S] -- a small HTTP/1.1
backend on 127.0.0.1 that keeps connections open and counts them.

It answers every request with "you asked for PATH" (Content-Length framed;
?delay=S waits S seconds first), keeps the connection open unless the
request says otherwise (Connection: close, or HTTP/1.0 without
keep-alive), and prints one line per event, flushed at once:

  connection N opened
  answered PATH
  idle connection closed               (--idle-close: S seconds after its
                                        last answer, like the keep-alive
                                        timeout of most app servers)
  closed with a request unread         (--lazy-close: a connection idle more
                                        than S seconds is closed when the
                                        next request arrives, unread: the
                                        race of a timeout and a request,
                                        made to happen every time)"""
import select
import socket
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

port = int(sys.argv[1])
mode, limit = (sys.argv[2], float(sys.argv[3])) if len(sys.argv) > 3 else (None, None)
lock = threading.Lock()
opened = 0


def say(line):
    with lock:
        print(line, flush=True)


def serve(conn):
    buf = b""
    last_answer = None
    try:
        while True:
            if b"\r\n\r\n" not in buf:
                if last_answer is not None and not buf:
                    if mode == "--idle-close":
                        ready, _, _ = select.select([conn], [], [], limit)
                        if not ready:
                            say("idle connection closed")
                            return
                    elif mode == "--lazy-close":
                        select.select([conn], [], [])
                        if time.monotonic() - last_answer > limit:
                            say("closed with a request unread")
                            return
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
                continue
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip().lower()
            length = int(headers.get("content-length", "0"))
            while len(buf) < length:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            buf = buf[length:]
            url = urlsplit(target)
            delay = parse_qs(url.query).get("delay")
            if delay:
                time.sleep(float(delay[0]))
            connection = headers.get("connection", "")
            close = "close" in connection if version == "HTTP/1.1" else "keep-alive" not in connection
            body = f"you asked for {url.path}\n".encode()
            answer = (f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                      f"Content-Length: {len(body)}\r\n"
                      + ("Connection: close\r\n" if close else "") + "\r\n").encode()
            conn.sendall(answer + (b"" if method == "HEAD" else body))
            say(f"answered {url.path}")
            last_answer = time.monotonic()
            if close:
                return
    except (ConnectionError, ValueError):
        pass
    finally:
        conn.close()


server = socket.create_server(("127.0.0.1", port), backlog=128)
while True:
    conn, _ = server.accept()
    opened += 1
    say(f"connection {opened} opened")
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
