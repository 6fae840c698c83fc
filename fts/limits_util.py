"""Helpers shared by the stage 22 tests of limits and access (issue 31,
/work/notes/spec31.md): limit_req, limit_conn, allow/deny, basic_auth,
max_body_size, the PROXY protocol and trusted_proxies.

- start_limited() starts rsp with the stage's usual config (proxy.py's
  proxy_arguments, whatever options it knows) plus stage 22's settings
  appended as Lua globals (so this file needs no change to proxy.py), and
  a status listener (proxy.status_port); rewrite_limited() rewrites that
  file for a reload;
- proxy_v1() / proxy_v2() build PROXY protocol headers (v1 text, v2
  binary: PROXY or LOCAL, INET or INET6);
- SourceConn is a client.Conn whose socket is bound to a chosen
  127.x.y.z (any of them works on Linux loopback: each is a client
  address of its own) and may send a PROXY header first; fetch_from()
  makes one request that way;
- write_htpasswd() writes sha512crypt lines (openssl passwd -6),
  basic() an Authorization header;
- refused() / site_refused() / wait_refused() read status.json's
  "limits" and sites[].refused.

Every test uses rate SLOW (one token per 1000 s): no token comes back
while a test runs, so every count is exact and nothing depends on time.
"""

import base64
import ipaddress
import socket
import struct
import subprocess

from client import READ_TIMEOUT, Conn, Reader
from netutil import LOOPBACK, free_port, wait_until_listening
from proxy import backend_address, lua_value, proxy_arguments
from test_status import POLL_TIMEOUT, status_json, wait_status

LIMIT_SLOTS = 16384          # the spec's table size (limit.h)
SLOW = 0.001                 # a rate (per second) that gives no token back during a test
REASONS = ("limit_req", "limit_conn", "deny", "auth", "body_size", "proxy_protocol")
IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h: pick the source port at connect(), per 4-tuple


# -- rsp with stage 22's settings --------------------------------------------------------


def limited_config(rsp, port, backends, workdir, options, limits):
    """Writes workdir/rsp-PORT.lua: proxy_arguments' config for `options`,
    then each of `limits` ({global: Python value}) as a Lua global.
    Returns the path."""
    (path,) = proxy_arguments(rsp.stage, port, [backend_address(b) for b in backends], workdir, options)
    with open(path, "a") as f:
        for name, value in (limits or {}).items():
            f.write(f"{name} = {lua_value(value)}\n")
    return path


def start_limited(start_proxy, rsp, tmp_path, *backends, limits=None, proxy_protocol=False, **options):
    """rsp in front of `backends` with `options` (as start_proxy takes
    them) and stage 22's `limits`; a status listener on a free port
    (proxy.status_port). proxy_protocol=True makes the listener the table
    form { address = "127.0.0.1:PORT", proxy_protocol = true }. What was
    given is kept on the proxy (proxy.limit_options) for
    rewrite_limited()."""
    port = options.pop("port", None) or free_port()
    status_port = free_port()
    options = {"status_listen": f"{LOOPBACK}:{status_port}", **options}
    if proxy_protocol:
        options["listen"] = {"address": f"{LOOPBACK}:{port}", "proxy_protocol": True}
    path = limited_config(rsp, port, backends, str(tmp_path), options, limits)
    proxy = start_proxy(args=[path], port=port)
    wait_until_listening(status_port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = status_port
    proxy.limit_options = options
    return proxy


def rewrite_limited(rsp, proxy, tmp_path, *backends, limits=None):
    """Rewrites the config file of a start_limited proxy: the same options
    (listener, status listener), these backends and `limits`."""
    path = limited_config(rsp, proxy.port, backends, str(tmp_path), proxy.limit_options, limits)
    assert path == proxy.args[0], (path, proxy.args)
    return path


# -- PROXY protocol headers ----------------------------------------------------------------

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy_v1(source, destination=None, sport=40000, dport=80):
    """A PROXY protocol v1 line: TCP4 or TCP6 by the source's family."""
    six = ":" in source
    destination = destination or ("::1" if six else LOOPBACK)
    return f"PROXY {'TCP6' if six else 'TCP4'} {source} {destination} {sport} {dport}\r\n".encode()


def proxy_v1_unknown():
    return b"PROXY UNKNOWN\r\n"


def proxy_v2(source=None, destination=None, sport=40000, dport=80, local=False, tlvs=b""):
    """A PROXY protocol v2 header: command PROXY with the addresses (INET
    or INET6 over STREAM, by the source's family) and `tlvs` after them,
    or LOCAL (local=True: no addresses, family UNSPEC)."""
    if local:
        return V2_SIGNATURE + bytes([0x20, 0x00]) + struct.pack("!H", len(tlvs)) + tlvs
    six = ":" in source
    destination = destination or ("::1" if six else LOOPBACK)
    family = socket.AF_INET6 if six else socket.AF_INET
    body = (socket.inet_pton(family, source) + socket.inet_pton(family, destination)
            + struct.pack("!HH", sport, dport) + tlvs)
    return V2_SIGNATURE + bytes([0x21, 0x21 if six else 0x11]) + struct.pack("!H", len(body)) + body


def nth_ipv4(base, n):
    """The n-th address after `base` (a str), as a str."""
    return str(ipaddress.IPv4Address(base) + n)


# -- clients from chosen addresses ------------------------------------------------------------


def source_socket(port, source=None, timeout=READ_TIMEOUT, address=LOOPBACK):
    """A TCP socket connected to address:port, its local end bound to
    `source` (a 127.x.y.z or ::1) when given; the source port is chosen
    at connect() (IP_BIND_ADDRESS_NO_PORT), so many connections from one
    source address do not run out of ports to bind."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        if source is not None:
            if family == socket.AF_INET:
                sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((source, 0))
        sock.connect((address, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


class SourceConn(Conn):
    """A client.Conn from `source` (None: the kernel's choice), sending
    `prefix` (a PROXY header) before anything else."""

    def __init__(self, port, source=None, prefix=b"", host=None, timeout=READ_TIMEOUT, address=LOOPBACK):
        self.port = port
        self.host = host or f"{LOOPBACK}:{port}"
        self.sock = source_socket(port, source, timeout, address)
        self.reader = Reader(self.sock)
        if prefix:
            self.sock.sendall(prefix)


def fetch_from(proxy, source=None, path="/echo", method="GET", headers=(), body=b"", host=None, prefix=b"",
               address=LOOPBACK):
    """One request on a new connection from `source` (with a PROXY
    header `prefix` first, if given): its framed response."""
    with SourceConn(proxy.port, source, prefix, host, address=address) as c:
        return c.request(method, path, headers, body)


def statuses(proxy, n, **request):
    """The statuses of n requests, each on a new connection (fetch_from's
    arguments)."""
    return [fetch_from(proxy, **request).status for _ in range(n)]


# -- basic auth ----------------------------------------------------------------------------


def write_htpasswd(path, users):
    """Writes an htpasswd file of {user: password} with sha512crypt
    hashes ($6$, from openssl passwd -6); returns its path as a str."""
    lines = ["# written by the test"]
    for user, password in users.items():
        hashed = subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=password, capture_output=True,
                                text=True, check=True).stdout.strip()
        assert hashed.startswith("$6$"), hashed
        lines.append(f"{user}:{hashed}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def basic(user, password):
    """An Authorization header for HTTP basic auth."""
    return ("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())


# -- status.json's counters -------------------------------------------------------------------


def zero_refused():
    return dict.fromkeys(REASONS, 0)


def refused(doc):
    """status.json's limits.refused."""
    assert "limits" in doc, f"status.json has no 'limits': {sorted(doc)}"
    return doc["limits"]["refused"]


def site_refused(doc, site):
    """sites[].refused of site `site` ({} of zeros if the site lists none)."""
    found = [s for s in doc["sites"] if s["name"] == site]
    assert len(found) == 1, f"site {site!r} in status.json: {[s['name'] for s in doc['sites']]}"
    return found[0]["refused"]


def wait_refused(proxy, **counts):
    """Waits (bounded) until status.json's limits.refused is exactly
    `counts` (reasons not named: 0); returns that document."""
    expected = {**zero_refused(), **counts}
    return wait_status(proxy, lambda d: refused(d) == expected, f"limits.refused == {expected}")


def current_status(proxy):
    return status_json(proxy)
