# stall.py PORT -- streams a line a second to its first client, then lets
# the kernel drop every later SYN, like a host that has vanished.
import socket, sys, time

server = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=0)
client, _ = server.accept()
client.recv(65536)
client.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
filler = socket.create_connection(server.getsockname())  # fills the queue
for i in range(1, 100000):
    client.sendall(f"tick {i} sent at {time.strftime('%H:%M:%S')}\n".encode())
    time.sleep(1)
