# spin.py PORT -- GET /static/site.css alone; then GET /spin and, 20 ms
# later on another connection, /static/site.css again. Prints each answer's
# status and how long it took from the moment its request was sent.
import socket, sys, threading, time

port = int(sys.argv[1])
results = {}

def get(label, path):
    s = socket.create_connection(("127.0.0.1", port))
    sent = time.monotonic()
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: www.example.com\r\n\r\n".encode())
    answer = s.makefile("rb").read()
    results[label] = (answer[9:12].decode(), time.monotonic() - sent)

def show(label, note=""):
    status, seconds = results[label]
    print(f"{label:8}{status} after {seconds:.3f} s   {note}".rstrip())

get("static:", "/static/site.css")   # once to warm the backend up
get("static:", "/static/site.css")
show("static:", "(alone)")
spin = threading.Thread(target=get, args=("spin:", "/spin"))
spin.start()
time.sleep(0.02)
get("static:", "/static/site.css")
spin.join()
show("static:", "(sent 20 ms after /spin)")
show("spin:")
print("the static file waited for the spin to be cut off:",
      "yes" if results["static:"][1] > 0.05 else "no")
