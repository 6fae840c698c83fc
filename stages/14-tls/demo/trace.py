#!/usr/bin/env python3
"""trace.py FILE -- the life of the first client connection in an strace
log of rsp (strace -f -e trace=accept4,read,write,epoll_wait -o FILE):
from its accept4 to the first bytes rsp writes to a backend, keeping the
calls on the client's socket and the epoll_waits that led to them. Made
readable: no pid column, no addresses, no epoll data; of what rsp
writes, the first 5 bytes (a TLS record header); of what it reads, the
bytes only when there are 5 or fewer (a record header, or bytes that
came one at a time): the others are encrypted, or random, and differ on
every run."""
import re
import sys

CALL = re.compile(r'^(?:\d+ +)?(\w+)\((\d+), (.*)\) += (.*)$')


def unescape(text):
    """The bytes of one of strace's quoted strings (C escapes)."""
    out, i = bytearray(), 0
    simple = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "\\": 92, '"': 34}
    while i < len(text):
        if text[i] == "\\" and text[i + 1] in simple:
            out.append(simple[text[i + 1]])
            i += 2
        elif text[i] == "\\":
            digits = re.match(r"[0-7]{1,3}", text[i + 1:]).group()
            out.append(int(digits, 8))
            i += 1 + len(digits)
        else:
            out.append(ord(text[i]))
            i += 1
    return bytes(out)


def escape(data):
    """strace's way of writing bytes."""
    names = {10: "\\n", 9: "\\t", 13: "\\r", 11: "\\v", 12: "\\f", 92: "\\\\", 34: '\\"'}
    out = ""
    for k, b in enumerate(data):
        if b in names:
            out += names[b]
        elif 32 <= b < 127:
            out += chr(b)
        elif k + 1 < len(data) and 48 <= data[k + 1] <= 55:
            out += "\\%03o" % b  # a digit follows: three digits, as strace does
        else:
            out += "\\%o" % b
    return out


def readable(name, fd, args, result):
    result = re.sub(r" \(Resource temporarily unavailable\)", "", result)
    if name == "epoll_wait":
        events = ",".join(re.findall(r"events=([A-Z|]+)", args))
        args = re.sub(r"\[.*\]", f"[{events}]", args)
    elif name == "accept4":
        args = "..."
    else:
        m = re.match(r'"((?:[^"\\]|\\.)*)"(\.\.\.)?, (\d+)$', args)
        if m:
            data = unescape(m.group(1))
            if name == "read" and (len(data) > 5 or m.group(2)):
                args = f"..., {m.group(3)}"  # ciphertext, or the client's random bytes
            else:
                more = "..." if len(data) > 5 or m.group(2) else ""
                args = f'"{escape(data[:5])}"{more}, {m.group(3)}'
        else:
            args = re.sub(r"^0x[0-9a-f]+", "...", args)
    return f"{name}({fd}, {args}) = {result}"


lines = [CALL.match(line.rstrip("\n")) for line in open(sys.argv[1])]
lines = [m.groups() for m in lines if m]
start = next(i for i, (name, _, _, result) in enumerate(lines)
             if name == "accept4" and re.match(r"\d+$", result))
client = lines[start][3]
shown = [readable(*lines[start])]
pending_wait = None
for name, fd, args, result in lines[start + 1:]:
    if name == "epoll_wait":
        pending_wait = (name, fd, args, result)
    elif fd == client:
        if pending_wait:
            shown.append(readable(*pending_wait))
            pending_wait = None
        shown.append(readable(name, fd, args, result))
    elif name == "write" and fd not in ("1", "2"):
        shown.append(readable(name, fd, args, result) + "   (to the backend)")
        break
width = max(len(line.split(" = ")[0]) for line in shown)
for line in shown:
    call, _, result = line.partition(" = ")
    print(f"{call:<{width}} = {result}")
