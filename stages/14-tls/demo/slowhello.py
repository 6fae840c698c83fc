#!/usr/bin/env python3
"""slowhello.py PORT NAME CA N DELAY -- a TLS client that takes its time:
it sends the first N bytes of its ClientHello one at a time, DELAY
seconds apart, then the rest at once, finishes the handshake with
127.0.0.1:PORT (SNI NAME, trusting only CA) and, DELAY seconds later,
sends its Finished and GET / together; then prints what came back. OpenSSL runs in memory (ssl.MemoryBIO), so that this script,
not the ssl module, decides how the bytes go out."""
import socket
import ssl
import sys
import time

port, name, ca, n, delay = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])
incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one byte, one segment


def receive():
    data = sock.recv(65536)
    if data:
        incoming.write(data)
    else:
        incoming.write_eof()
    return len(data)


try:
    tls.do_handshake()
except ssl.SSLWantReadError:
    hello = outgoing.read()
    for i in range(n):
        sock.send(hello[i:i + 1])
        time.sleep(delay)
    sock.sendall(hello[n:])
    print(f"ClientHello: {len(hello)} bytes, the first {n} one at a time, {int(delay * 1000)} ms apart")
while True:
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        sock.sendall(outgoing.read())
        if receive() == 0:
            sys.exit("the server closed the connection during the handshake")
print(f"handshake done: {tls.version()}, ALPN {tls.selected_alpn_protocol()}")
# The client's Finished and the request leave together, in one segment,
# DELAY seconds later: the server is sure to be waiting for them.
time.sleep(delay)
tls.write(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
sock.sendall(outgoing.read())
reply = b""
while True:
    try:
        chunk = tls.read(65536)
    except ssl.SSLWantReadError:
        if receive() == 0:
            break
        continue
    except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
        break
    if not chunk:
        break
    reply += chunk
head, _, body = reply.partition(b"\r\n\r\n")
print("GET / over it:", head.split(b"\r\n")[0].decode(), "--", body.decode().splitlines()[0])
