"""Loopback ports: picking free ones and waiting for a listener."""

import socket
import time

LOOPBACK = "127.0.0.1"


def free_port():
    """A TCP port on 127.0.0.1 that nothing is bound to right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def listening_ports():
    """Ports with a socket in LISTEN state in this network namespace.

    Read from /proc/net/tcp{,6}: unlike a test connection, looking does not
    make anybody accept a connection (which, through a proxy, would also
    reach a backend)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)  # header
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A":  # TCP_LISTEN
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            pass
    return ports


def wait_until_listening(port, process=None, timeout=10.0, what="server"):
    """Waits (bounded) until something listens on `port`.

    If `process` (a subprocess.Popen) exits first, fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} before listening on port {port}")
        if port in listening_ports():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} is not listening on port {port} after {timeout} s")
        time.sleep(0.02)
