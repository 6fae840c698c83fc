"""Chapter 18's close demo: close.py PORT sends one request with
Connection: close, reads the response and its end of file, keeps its
socket open one second more without sending anything, then closes it.
Prints what it got, and whether rsp's end was still open at the end of
that second (an fd of rsp's for our connection: /proc/PID/fd)."""
import os
import socket
import sys
import time


def rsp_holds(pid, our_port):
    """True if process pid has a socket whose remote port is our_port."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == our_port:
                    inodes.add(fields[9])
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in {f"socket:[{i}]" for i in inodes}:
                return True
        except OSError:
            pass
    return False


port, pid = int(sys.argv[1]), int(sys.argv[2])
with socket.create_connection(("127.0.0.1", port)) as sock:
    sock.sendall(b"GET / HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")
    got = b""
    while True:
        data = sock.recv(65536)
        if not data:
            break
        got += data
    status = got.split(b"\r\n", 1)[0].decode()
    print(f"client: {len(got)} bytes, {status}, then end of file")
    time.sleep(1)
    held = rsp_holds(pid, sock.getsockname()[1])
    print("client: one second later rsp " + ("still holds its end: it waits for ours"
                                            if held else "has closed its end"))
