#!/usr/bin/env python3
"""stopping.py PORT RSP_PID drain|timeout|twice -- clients in flight while
rsp (process RSP_PID, listening on PORT, in front of demo/backend.py) is
told to stop; this script sends the signals itself, and says what each
client saw.

  drain    three keep-alive connections: one idle, one receiving a slow
           response (20 KB over 2 s), one whose request waits 1 s at the
           backend; then SIGTERM, and a new connection tried at once
  timeout  one client reading a response that never ends; then SIGTERM
           (run it with shutdown_timeout = 1)
  twice    the same, with SIGTERM twice, 0.3 s apart"""
import os
import signal
import socket
import sys
import time

port, pid, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def connect():
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def send(conn, path):
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: demo\r\n\r\n".encode())


def read_head(conn, data=b""):
    """(status, headers, the bytes after the head)."""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a whole head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, rest


def read_to_end(conn, have=b""):
    """Reads until the connection ends: (the bytes, "EOF" or "reset")."""
    try:
        while chunk := conn.recv(65536):
            have += chunk
    except ConnectionResetError:
        return have, "reset"
    return have, "EOF"


def read_body(conn, headers, rest):
    """The body by its Content-Length (as much of it as comes), then
    whatever follows until the end: (body, bytes after it, how it ended)."""
    length = int(headers["content-length"])
    try:
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return rest, 0, "EOF"
            rest += chunk
    except ConnectionResetError:
        return rest, 0, "reset"
    extra, end = read_to_end(conn)
    return rest[:length], len(rest) - length + len(extra), end


def sigterm(why=""):
    os.kill(pid, signal.SIGTERM)
    print(f"-- SIGTERM{why}")
    return time.monotonic()


if mode == "drain":
    idle = connect()
    send(idle, "/")
    status, headers, rest = read_head(idle)
    while len(rest) < int(headers["content-length"]):
        rest += idle.recv(65536)    # its answer, and the connection stays open
    flowing = connect()
    send(flowing, "/drip?chunks=20&size=1000&delay=0.1")
    status, flowing_headers, flowing_rest = read_head(flowing)
    while len(flowing_rest) < 2000:
        flowing_rest += flowing.recv(65536)
    waiting = connect()
    send(waiting, "/?delay=1")
    time.sleep(0.3)                 # the request is at the backend
    start = sigterm()

    idle.settimeout(1)
    try:
        end = "EOF" if idle.recv(100) == b"" else "bytes"
    except ConnectionResetError:
        end = "reset"
    except socket.timeout:
        end = "nothing"
    verdict = "at once" if time.monotonic() - start < 0.5 else "late"
    print(f"the idle keep-alive connection: closed by rsp {verdict} ({end})")
    time.sleep(0.2)
    try:
        connect().close()
        print("a new connection: accepted")
    except ConnectionRefusedError:
        print("a new connection: refused")

    try:
        status, headers, rest = read_head(waiting)
        body, extra, end = read_body(waiting, headers, rest)
        print(f"the request waiting at the backend: {status}, {len(body)} bytes,"
              f" Connection: {headers.get('connection', '(none)')}; then {end}")
    except (ConnectionError, OSError):
        print("the request waiting at the backend: no answer; the connection closed")
    body, extra, end = read_body(flowing, flowing_headers, flowing_rest)
    length = int(flowing_headers["content-length"])
    got = f"all {length} bytes" if len(body) == length else f"cut off after {len(body)} of {length} bytes"
    print(f"the response flowing at SIGTERM: {got}; then {end} ({time.monotonic() - start:.1f} s after SIGTERM)")
else:
    conn = connect()
    send(conn, "/endless")
    status, headers, rest = read_head(conn)
    while len(rest) < 5000:
        rest += conn.recv(65536)
    start = sigterm()
    if mode == "twice":
        time.sleep(0.3)
        second = sigterm(" again")
    got, end = read_to_end(conn)
    if mode == "twice":
        took = time.monotonic() - second
        verdict = "at once by the second SIGTERM" if took < 0.5 else f"{took:.1f} s after the second SIGTERM"
    else:
        took = time.monotonic() - start
        verdict = f"{took:.1f} s after SIGTERM, " + (
            "as shutdown_timeout says" if 0.8 <= took < 2 else "NOT what shutdown_timeout says")
    print(f"the endless response: {status}, {len(got)} more bytes, cut off {verdict}; then {end}")
