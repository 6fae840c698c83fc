# hangup.py PORT: start a big download, then walk away.
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /big8.bin HTTP/1.0\r\n\r\n")
s.shutdown(socket.SHUT_WR)
data = b""
while len(data) < 1000:             # the first kilobyte, then no more
    data += s.recv(1000 - len(data))
print("got", len(data), "bytes, hanging up")
s.close()
