# halfclose.py PORT: send a request, half-close, read the whole answer.
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
s.shutdown(socket.SHUT_WR)          # "I have finished sending"
answer = b""
while chunk := s.recv(65536):
    answer += chunk
print(len(answer), "bytes:", answer.split(b"\r\n")[0].decode())
