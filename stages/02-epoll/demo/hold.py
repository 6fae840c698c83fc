# hold.py PORT N: open N connections to the proxy and keep them open.
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
time.sleep(3)
