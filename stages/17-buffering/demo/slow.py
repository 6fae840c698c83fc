"""Clients for demo/run-slowupload.sh.

slow.py upload PORT SECONDS   POSTs a 1,000-byte body a byte every half
                              second for SECONDS, then the rest at once,
                              and prints the answer's first line
slow.py steady PORT COUNT     COUNT requests for /, one after the other,
                              each given 2 seconds: prints how each went
"""

import socket
import sys
import time


def upload(port, seconds):
    body = b"x" * 1000
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /upload HTTP/1.1\r\nHost: demo\r\nContent-Length: 1000\r\n"
                  b"Connection: close\r\n\r\n")
        sent, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            s.sendall(body[sent:sent + 1])
            sent += 1
            time.sleep(0.5)
        s.sendall(body[sent:])
        answer = b""
        while True:
            piece = s.recv(4096)
            if not piece:
                break
            answer += piece
    head, _, text = answer.partition(b"\r\n\r\n")
    status = head.split(b"\r\n")[0].decode()
    # One write of the whole line: the two uploaders share a stdout, and
    # print() unbuffered writes the text and its newline apart, so their
    # lines could interleave.
    sys.stdout.write(f"slow upload: {status}, {text.decode().strip()}\n")
    sys.stdout.flush()


def steady(port, count):
    for i in range(count):
        start = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")
                first = s.recv(4096).split(b"\r\n")[0].decode()
            print(f"steady client, request {i + 1}: {first} in {(time.monotonic() - start) * 1000:.0f} ms")
        except TimeoutError:
            print(f"steady client, request {i + 1}: no answer in 2 s")


if __name__ == "__main__":
    mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    upload(port, n) if mode == "upload" else steady(port, n)
