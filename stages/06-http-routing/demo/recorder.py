# recorder.py PORT -- a raw TCP backend that shows what it receives: it
# reads a connection until the sender has been quiet for half a second,
# prints every byte ("\r\n" shown as such), and answers "ok".
import socket, sys

server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    conn, _ = server.accept()
    conn.settimeout(0.5)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except socket.timeout:
        pass
    print(data.decode("latin-1").replace("\r\n", "\\r\\n\n"), end="")
    print("-- end of what the backend received --", flush=True)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
    conn.close()
