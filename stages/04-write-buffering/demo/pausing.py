# pausing.py PORT SECONDS: a client with a 4 KiB receive buffer that sends
# its request, does nothing for SECONDS seconds, then reads everything.
import socket, sys, time

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /big HTTP/1.0\r\n\r\n")
time.sleep(float(sys.argv[2]))
received = 0
while chunk := s.recv(1 << 20):
    received += len(chunk)
print(f"the client received {received} bytes")
