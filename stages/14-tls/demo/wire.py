#!/usr/bin/env python3
"""wire.py FILE SECRET -- what rsp read from its first client, in an
strace log of rsp (strace -f -e trace=accept4,read -s 65536 -xx -o FILE):
every byte of the reads on the socket accept4 returned, which are the
bytes the client sent over the network. Printable bytes are shown as
text; anything else as TLS records (type, length) and the first bytes
of the last one in hex. Last, whether SECRET is among those bytes."""
import re
import sys

CALL = re.compile(r'^(?:\d+ +)?(accept4|read)\((\d+), (.*)\) += (-?\d+)')
RECORD_TYPES = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data"}

client, data, reads = None, b"", 0
for line in open(sys.argv[1]):
    m = CALL.match(line)
    if not m:
        continue
    name, fd, args, result = m.groups()
    if name == "accept4" and client is None and int(result) >= 0:
        client = result
    elif name == "read" and fd == client and int(result) > 0:
        data += bytes.fromhex(re.match(r'"((?:\\x[0-9a-f]{2})*)"', args).group(1).replace("\\x", ""))
        reads += 1

print(f"rsp read {len(data)} bytes from the client, in {reads} read{'s' if reads != 1 else ''}:")
if all(32 <= b < 127 or b in (10, 13) for b in data):
    for line in data.decode().split("\r\n"):
        print(f"  {line}")
else:
    i, last = 0, None
    while i + 5 <= len(data):
        kind, length = data[i], int.from_bytes(data[i + 3:i + 5], "big")
        print(f"  TLS record: {RECORD_TYPES.get(kind, kind)}, {length} byte{'s' if length != 1 else ''}")
        last = data[i + 5:i + 5 + length]
        i += 5 + length
    print("  the last one begins: " + " ".join(f"{b:02x}" for b in last[:16]))
secret = sys.argv[2].encode()
print(f"{sys.argv[2]!r} in what rsp read: {'yes' if secret in data else 'no'}")
