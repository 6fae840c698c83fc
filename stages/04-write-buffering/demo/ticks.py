# ticks.py PORT SECONDS: client A. Asks for the page (stall.py's stream of
# ticks, one a second), reads it for SECONDS seconds and reports how
# regularly the ticks arrived.
import socket, sys, time

s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
s.settimeout(0.1)
end = time.monotonic() + float(sys.argv[2])
arrivals, data = [], b""
while time.monotonic() < end:
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        continue
    if not chunk:
        break
    data += chunk
    arrivals += [time.monotonic()] * chunk.count(b"tick")
# The longest silence: between two ticks, or from the last one to the end.
times = arrivals + [time.monotonic()]
longest = max((b - a for a, b in zip(times, times[1:])), default=0.0)
print(f"A got {len(arrivals)} ticks; its longest wait for one: {longest:.1f} s "
      f"({'the proxy froze' if longest > 2 else 'they kept coming'})")
