# proxy_client.py PORT [--from ADDRESS] [--v1 "TCP4 SRC DST SPORT DPORT"]
#                 [--v2 SRC_IPV6] [--xff VALUE]
# One request to rsp on 127.0.0.1:PORT, from ADDRESS (127.0.0.1 by
# default), as a load balancer would send it: first a PROXY protocol
# header (version 1, a text line; or version 2, binary, for an IPv6
# client), then GET / with X-Forwarded-For: VALUE if given. Prints what it
# sent, then the answer's status line and body, or that rsp closed the
# connection without a word.
import argparse, ipaddress, socket, struct, sys

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"

args = argparse.ArgumentParser()
args.add_argument("port", type=int)
args.add_argument("--from", dest="source", default="127.0.0.1")
args.add_argument("--v1")
args.add_argument("--v2")
args.add_argument("--xff")
a = args.parse_args()

header = b""
if a.v1:
    header = f"PROXY {a.v1}\r\n".encode()
    print(f"sent: PROXY {a.v1}\\r\\n")
elif a.v2:
    addresses = (ipaddress.IPv6Address(a.v2).packed + ipaddress.IPv6Address("2001:db8::80").packed +
                 struct.pack("!HH", 51234, 443))
    # version 2, command PROXY (0x21); TCP over IPv6 (0x21); the length
    fixed = V2_SIGNATURE + bytes([0x21, 0x21]) + struct.pack("!H", len(addresses))
    header = fixed + addresses
    print(f"sent: {fixed.hex(' ')}  + {len(addresses)} bytes: {a.v2} port 51234 -> [2001:db8::80]:443")
request = "GET / HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n"
if a.xff:
    request += f"X-Forwarded-For: {a.xff}\r\n"
    print(f"      X-Forwarded-For: {a.xff}")
request += "\r\n"

s = socket.socket()
s.settimeout(10)
s.bind((a.source, 0))
s.connect(("127.0.0.1", a.port))
s.sendall(header + request.encode())
answer = b""
try:
    while chunk := s.recv(65536):
        answer += chunk
except ConnectionResetError:
    pass
if not answer:
    print("rsp closed the connection without an answer")
    sys.exit(0)
head, _, body = answer.decode().partition("\r\n\r\n")
print(head.split("\r\n")[0])
sys.stdout.write(body)
