#!/usr/bin/env python3
"""login.py PORT [NAME CA] -- a login form sent to rsp on 127.0.0.1:PORT:
POST /login with user=alice&password=hunter2, over plain HTTP, or over
TLS when NAME (the SNI and Host) and CA (the only certificate authority
trusted) are given. Prints the response's status line and body."""
import socket
import ssl
import sys

port = int(sys.argv[1])
name = sys.argv[2] if len(sys.argv) > 2 else "www.example.com"
form = b"user=alice&password=hunter2"
request = (b"POST /login HTTP/1.1\r\nHost: " + name.encode() + b"\r\n"
           b"Content-Type: application/x-www-form-urlencoded\r\n"
           b"Content-Length: " + str(len(form)).encode() + b"\r\nConnection: close\r\n\r\n" + form)
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
if len(sys.argv) > 3:
    sock = ssl.create_default_context(cafile=sys.argv[3]).wrap_socket(sock, server_hostname=name)
sock.sendall(request)
answer = b""
while chunk := sock.recv(65536):
    answer += chunk
head, _, body = answer.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode())
print(body.decode(), end="")
