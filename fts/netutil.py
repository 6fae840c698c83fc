"""Loopback ports: picking free ones and waiting for a listener."""

import re
import socket
import time

LOOPBACK = "127.0.0.1"


def free_port():
    """A TCP port on 127.0.0.1 that nothing is bound to right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


# The sockets that hold closed_ports' ports, by port, open until the
# session ends (or release_port).
_held = {}


def closed_ports(count):
    """`count` different loopback ports that refuse connections for the
    rest of the test session: each is bound by a socket of ours that never
    listens (and without SO_REUSEADDR, so that nothing else can bind it:
    not even an rsp or a backend given a port free_port() found free a
    moment before). A port that is merely free now could be taken a moment
    later by a backend of another suite running at the same time, and a
    "dead" backend would answer. A test that starts a backend there later
    calls release_port first."""
    ports = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((LOOPBACK, 0))
        port = s.getsockname()[1]
        _held[port] = s
        ports.append(port)
    return sorted(ports)


def release_port(port):
    """Lets go of a port closed_ports holds, for a backend to listen there."""
    _held.pop(port).close()
    return port


def ipv6_loopback_available():
    """True if this machine has IPv6 on loopback (::1 can be bound)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def is_listening(port):
    """True if a socket is in LISTEN state on `port` in this network
    namespace.

    Read from /proc/net/tcp{,6}: unlike a test connection, looking does not
    make anybody accept a connection (which, through a proxy, would also
    reach a backend). The tables also hold every connection waiting to
    close, often tens of thousands after a long run, so they are searched
    as text rather than parsed line by line."""
    # "  12: 0100007F:1F90 00000000:0000 0A ...": local address:port,
    # remote address:port (zero for a listener), state 0A (TCP_LISTEN).
    listener = re.compile(rf":{port:04X} [0-9A-F]+:0000 0A ")
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                if listener.search(f.read()):
                    return True
        except FileNotFoundError:
            pass
    return False


def wait_until_listening(port, process=None, timeout=10.0, what="server"):
    """Waits (bounded) until something listens on `port`.

    If `process` (a subprocess.Popen) exits first, fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} before listening on port {port}")
        if is_listening(port):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} is not listening on port {port} after {timeout} s")
        time.sleep(0.02)


def wait_for(condition, what, timeout, pause=0.02):
    """Calls condition() until it is true; fails the test after `timeout`
    seconds (a bound on waiting, never a measurement)."""
    import pytest  # only the tests need it, not every user of this module
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not the case after {timeout} s")
        time.sleep(pause)
