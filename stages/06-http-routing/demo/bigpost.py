# bigpost.py PORT N KB -- N times: a POST of KB kilobytes for a host the
# proxy does not serve, written whole before the answer is read, as many
# simple clients do. Counts what came back: a status line, or a reset.
import collections, socket, sys

port, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) * 1000
body = b"x" * size
request = (b"POST /upload HTTP/1.1\r\nHost: nobody.example.org\r\n"
           b"Content-Length: %d\r\n\r\n" % size) + body
outcomes = collections.Counter()
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(request)
        answer = s.makefile("rb").readline().decode().strip()
        outcomes[answer or "no answer"] += 1
    except (BrokenPipeError, ConnectionResetError):
        outcomes["no answer: the connection was reset (EPIPE or ECONNRESET)"] += 1
    s.close()
for outcome, count in sorted(outcomes.items(), key=lambda item: -item[1]):
    print(f"{count:7} {outcome}")
