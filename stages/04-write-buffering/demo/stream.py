# stream.py PORT MIB STATUS_FILE: a backend that answers every request with
# MIB MiB of body, as fast as it is allowed to send, and keeps in
# STATUS_FILE how many MiB it has handed to the kernel so far.
import socket, sys, threading

port, mib, status = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
chunk = bytes(range(256)) * 256                  # 64 KiB


def serve(conn):
    with conn:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % (mib << 20))
        for i in range(mib * 16):
            conn.sendall(chunk)
            if i % 16 == 15:
                with open(status, "w") as f:
                    f.write(f"{(i + 1) // 16}\n")


server = socket.create_server(("127.0.0.1", port))
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
