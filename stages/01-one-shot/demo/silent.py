# silent.py PORT SECONDS: connect, say nothing for SECONDS, hang up, like a
# phone on a bad network.
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
time.sleep(float(sys.argv[2]))
