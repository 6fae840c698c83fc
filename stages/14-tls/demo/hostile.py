#!/usr/bin/env python3
"""hostile.py PORT NAME CA STALLED HEADER_TIMEOUT -- clients that are no
good at TLS, and one that is, against 127.0.0.1:PORT:
  - STALLED clients send the first 100 bytes of a real ClientHello, then
    nothing: rsp must close them when HEADER_TIMEOUT (s) runs out;
  - five clients send something else, one after the other: plain HTTP,
    an SSH client's greeting, zero bytes, a TLS record header followed by
    junk, and a real handshake from a client that trusts another CA;
  - meanwhile a well-behaved client (SNI NAME, trusting CA) asks for /;
  - once the stalled ones are closed, one more plain HTTP client.
Prints what each saw, with a verdict where timing is involved."""
import socket
import ssl
import sys
import time

port, name, ca, stalled, header_timeout = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                           int(sys.argv[4]), float(sys.argv[5]))


def hello_bytes():
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context(cafile=ca).wrap_bio(incoming, outgoing, server_hostname=name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def what_came_back(sock):
    """Reads until the end; says what the server sent and how it ended."""
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
        ending = "closed"
    except ConnectionResetError:
        ending = "reset"
    except socket.timeout:
        return "nothing within 5 s (still open)"
    if got[:1] == b"\x15" and len(got) >= 7:
        alerts = {10: "unexpected_message", 40: "handshake_failure", 70: "protocol_version"}
        return f"a TLS alert ({alerts.get(got[6], got[6])}), then {ending}"
    return f"{ending} by rsp, {len(got)} bytes sent back" if got else f"{ending} by rsp, nothing sent back"


def garbage(label, data):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        print(f"{label}: {what_came_back(s)}")


print(f"== {stalled} clients send the first 100 bytes of a ClientHello, then nothing")
hello = hello_bytes()
waiting = []
for _ in range(stalled):
    s = socket.create_connection(("127.0.0.1", port), timeout=header_timeout + 5)
    s.sendall(hello[:100])
    waiting.append((s, time.monotonic()))

print("== five clients that do not speak TLS, or do not trust rsp's certificate")
garbage("plain HTTP (GET / HTTP/1.1)", f"GET / HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
garbage("an SSH client's greeting", b"SSH-2.0-OpenSSH_9.2p1\r\n")
garbage("100 zero bytes", bytes(100))
garbage("a TLS record header, then junk", b"\x16\x03\x01\x00\x05junk!")
with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
    try:
        ssl.create_default_context().wrap_socket(raw, server_hostname=name)  # the system's CAs
        print("a client that trusts other CAs: the handshake worked (?)")
    except ssl.SSLCertVerificationError as e:
        print(f"a client that trusts other CAs: it gave up: {e.verify_message}")

print("== meanwhile, a client that does everything right")
ctx = ssl.create_default_context(cafile=ca)
with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname=name) as s:
    s.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
    reply = b""
    while chunk := s.recv(65536):
        reply += chunk
    status = reply.split(b"\r\n", 1)[0].decode()
    print(f"{s.version()}, GET /: {status}")

print(f"== the {stalled} stalled clients")
ends = []
for s, began in waiting:
    seen = what_came_back(s)
    ends.append((seen, time.monotonic() - began))
    s.close()
kinds = sorted({seen for seen, _ in ends})
longest = max(t for _, t in ends)
shortest = min(t for _, t in ends)
bounded = header_timeout - 0.2 <= shortest and longest <= header_timeout + 1.5
took = f"{shortest:.1f} s" if f"{shortest:.1f}" == f"{longest:.1f}" else f"{shortest:.1f} to {longest:.1f} s"
print(f"{len(ends)} of {stalled}: {', '.join(kinds)}, after {took}: "
      + ("when header_timeout ran out" if bounded else "NOT when header_timeout ran out"))

print("== one more plain HTTP client")
garbage("plain HTTP (GET / HTTP/1.1)", f"GET / HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
