"""Chapter 18's pool demo.

  pool.py backend PORT N      an HTTP/1.1 keep-alive backend on PORT that
                              answers GET /r once N requests wait at once,
                              and GET /count (on a connection of its own)
                              with how many connections rsp opened to it
  pool.py clients PORT BACKEND N ROUNDS
                              N keep-alive clients of rsp on PORT, ROUNDS
                              rounds of one request each, every round
                              beginning once all have their answer; prints
                              the connections BACKEND accepted per round
"""
import socket
import sys
import threading

accepted = 0
lock = threading.Lock()


def read_head(sock, buffered):
    while b"\r\n\r\n" not in buffered:
        data = sock.recv(65536)
        if not data:
            return None, b""
        buffered += data
    head, _, rest = buffered.partition(b"\r\n\r\n")
    return head, rest


def serve(sock, barrier):
    global accepted
    buffered = b""
    first = True
    with sock:
        while True:
            head, buffered = read_head(sock, buffered)
            if head is None:
                return
            if first and not head.startswith(b"GET /count "):
                with lock:
                    accepted += 1  # a connection of rsp's
            first = False
            if head.startswith(b"GET /count "):
                with lock:
                    body = b"%d\n" % accepted
            else:
                barrier.wait()
                body = b"hello\n"
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def backend(port, n):
    barrier = threading.Barrier(n)
    listener = socket.create_server(("127.0.0.1", port), backlog=512)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=serve, args=(sock, barrier), daemon=True).start()


def ask(sock, buffered, path):
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: demo\r\n\r\n" % path)
    head, buffered = read_head(sock, buffered)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(buffered) < length:
        buffered += sock.recv(65536)
    return buffered[:length], buffered[length:]


def count(backend_port):
    with socket.create_connection(("127.0.0.1", backend_port)) as sock:
        return int(ask(sock, b"", b"/count")[0])


def clients(port, backend_port, n, rounds):
    done = threading.Barrier(n + 1)
    go = threading.Barrier(n + 1)

    def client():
        with socket.create_connection(("127.0.0.1", port)) as sock:
            buffered = b""
            for _ in range(rounds):
                go.wait()
                _, buffered = ask(sock, buffered, b"/r")
                done.wait()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    before = count(backend_port)
    opened = []
    for r in range(rounds):
        go.wait()
        done.wait()
        now = count(backend_port)
        opened.append(now - before)
        before = now
    print(f"{n} clients, {rounds} rounds: backend connections opened per round:")
    print(" ".join(str(o) for o in opened))
    print(f"in all: {sum(opened)}")


if __name__ == "__main__":
    if sys.argv[1] == "backend":
        backend(int(sys.argv[2]), int(sys.argv[3]))
    else:
        clients(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
