# slowreader.py PORT: fetch /big.bin (11 MiB) like a client on a slow link.
import socket, sys, time

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a tiny receive buffer
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /big.bin HTTP/1.0\r\n\r\n")
time.sleep(1)                                             # busy elsewhere for a second

received = 0
while chunk := s.recv(65536):
    received += len(chunk)
print(f"received {received} bytes")
