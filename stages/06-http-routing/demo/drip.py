# drip.py PORT -- sends a request head one byte per write, 10 ms apart,
# then prints the answer.
import socket, sys, time

head = b"GET /slowly HTTP/1.1\r\nHost: shop.example.com\r\nUser-Agent: drip\r\n\r\n"
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # no batching by Nagle
for byte in head:
    s.send(bytes([byte]))
    time.sleep(0.01)
print(s.makefile("rb").read().decode(), end="")
