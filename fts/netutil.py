"""Loopback ports: handing them out to tests (one allocator every suite
running on this machine shares), fixed ports under a lock, and waiting
for a listener.

Several pytest processes run at once (run_integration_tests runs three or
four suites side by side, a developer runs more, pytest-xdist adds
workers), so "a port that is free right now" is not enough: between the
moment a test learns of it and the moment its rsp binds it, another
suite, or an outgoing connection taking it as its source port, may take
it. So ports come from a pool that is nobody else's:

- the pool lies outside the kernel's ephemeral range
  (/proc/sys/net/ipv4/ip_local_port_range): no outgoing connection, and
  no socket bound to port 0 (backends started with port=0), is ever given
  one of its ports;
- each pytest process claims a block of the pool of its own, with a
  non-blocking flock on /tmp/rsp-fts-ports-FIRST+SIZE.lock (the kernel
  lets go of the lock when the process dies, however it dies), and hands
  its ports out in turn, wrapping around: the same port is never handed
  out twice in a row, and not again before the whole block went round;
- a port that cannot be bound right now (a socket of an earlier test
  still in TIME_WAIT there, a process that outlived its suite) is passed
  over.

Ports a test must use as they are (443, for the Location without a port;
one below 1024 for the privilege drop) are taken under a lock of their
own: see fixed_port_lock and privileged_port. The fixed ports the config
tests write into configs they only check (18080, 18443, 9090, ...) are
never bound by anybody: they lie below the pool, so nothing hands them
out either."""

import contextlib
import errno
import fcntl
import os
import socket
import struct
import time

LOOPBACK = "127.0.0.1"

# The pool: ports from POOL_FLOOR up, outside the ephemeral range, in
# blocks of BLOCK_SIZE. Below POOL_FLOOR are the fixed ports the tests
# write into configs (18080, 18443, 9090, 8001) and well-known services.
# A suite takes a port a second or two on average, and a port freed by a
# test stays in TIME_WAIT for a minute: 500 go round in minutes.
POOL_FLOOR = 20000
BLOCK_SIZE = 500
LOCK_DIR = "/tmp"
# How long a process waits for a block when every one is taken, and for a
# fixed port's lock (the test holding it elsewhere takes seconds).
BLOCK_WAIT = 120.0
FIXED_PORT_WAIT = 300.0


def _ephemeral_range():
    """(first, last) of the kernel's ephemeral ports."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first, last = (int(x) for x in f.read().split())
        return first, last
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def pool_range():
    """(first, end) of the ports the allocator hands out: the larger
    stretch of POOL_FLOOR..65535 outside the ephemeral range."""
    first, last = _ephemeral_range()
    below = (POOL_FLOOR, max(POOL_FLOOR, min(first, 65536)))
    above = (max(POOL_FLOOR, last + 1), 65536)
    stretch = max(below, above, key=lambda r: r[1] - r[0])
    if stretch[1] - stretch[0] < BLOCK_SIZE:
        raise RuntimeError(f"no room for test ports outside the ephemeral range {first}-{last} "
                           f"(/proc/sys/net/ipv4/ip_local_port_range): leave {BLOCK_SIZE} ports "
                           f"from {POOL_FLOOR} up out of it")
    return stretch


def _lock(path, wait):
    """An fd holding an exclusive flock on `path` (created if need be),
    or None if another process holds it for longer than `wait` seconds (or
    if this user may not read the file another one made). Opened read-only,
    and created only if missing (O_EXCL): /tmp's protected_regular refuses
    O_CREAT on another user's file even when it exists."""
    try:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError:
        return None
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.1)


def _bindable(port, reuse=False):
    """True if `port` can be bound on every address right now (without
    SO_REUSEADDR: not even a connection in TIME_WAIT is left on it; with
    `reuse`, as a listener binds: only a bound socket counts)."""
    families = [(socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")]
    for family, address in families:
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 here
        with s:
            if reuse:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind((address, port))
            except OSError as e:
                if family == socket.AF_INET6 and e.errno == errno.EADDRNOTAVAIL:
                    continue  # IPv6 without addresses
                return False
    return True


class _Block:
    """This process's block of the pool: claimed on first use, held
    until the process exits."""

    def __init__(self):
        self.first = None
        self.fd = None
        self.next = 0    # offset of the next port to try
        self.last = None  # the port handed out last

    def claim(self):
        if self.first is not None:
            return
        start, end = pool_range()
        firsts = range(start, end - BLOCK_SIZE + 1, BLOCK_SIZE)
        deadline = time.monotonic() + BLOCK_WAIT
        while True:
            for first in firsts:
                fd = _lock(os.path.join(LOCK_DIR, f"rsp-fts-ports-{first}+{BLOCK_SIZE}.lock"), 0)
                if fd is not None:
                    self.first, self.fd = first, fd
                    return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"every block of test ports {start}-{end - 1} is taken by another "
                                   f"test process ({len(firsts)} of them; lock files "
                                   f"{LOCK_DIR}/rsp-fts-ports-*.lock) for {BLOCK_WAIT:.0f} s")
            time.sleep(0.5)

    def take(self, usable):
        """The next port of the block after the last one handed out for
        which usable(port) is true (it may keep the port bound)."""
        self.claim()
        for offset in range(self.next, self.next + BLOCK_SIZE):
            port = self.first + offset % BLOCK_SIZE
            if port != self.last and usable(port):
                self.next = (offset + 1) % BLOCK_SIZE
                self.last = port
                return port
        return None


_block = _Block()


def free_port():
    """A TCP port nothing is bound to, this process's alone: the next
    one of its block of the pool (see the top of this file)."""
    port = _block.take(_bindable)
    if port is None:
        # Every port of the block has a connection in TIME_WAIT left
        # (hundreds of tests within a minute): any a listener can bind.
        port = _block.take(lambda p: _bindable(p, reuse=True))
    if port is None:
        raise RuntimeError(f"no port of {_block.first}-{_block.first + BLOCK_SIZE - 1} can be bound")
    return port


# The sockets that hold closed_ports' ports, by port, open until the
# session ends (or release_port).
_held = {}


def _hold(port):
    """Binds `port` on loopback without SO_REUSEADDR and keeps the socket
    in _held; False if it cannot be bound."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((LOOPBACK, port))
    except OSError:
        s.close()
        return False
    _held[port] = s
    return True


def closed_ports(count):
    """`count` different loopback ports that refuse connections for the
    rest of the test session: each is bound by a socket of ours that never
    listens (and without SO_REUSEADDR, so that nothing else can bind it:
    not even an rsp or a backend of this suite). They come from this
    process's block like free_port's, so no other suite is ever handed
    one. A test that starts a backend there later calls release_port
    first."""
    ports = []
    for _ in range(count):
        port = _block.take(_hold)
        if port is None:
            raise RuntimeError(f"no port of {_block.first}-{_block.first + BLOCK_SIZE - 1} can be bound")
        ports.append(port)
    return sorted(ports)


def release_port(port):
    """Lets go of a port closed_ports holds, for a backend to listen there."""
    _held.pop(port).close()
    return port


@contextlib.contextmanager
def machine_wide(name, wait):
    """Holds the lock /tmp/rsp-fts-NAME.lock for the with block, waiting
    (bounded) while a test of another suite holds it: for the few tests
    that load the machine on purpose (a soak of 200,000 requests), so that
    suites running side by side take turns instead of starving each
    other's. Fails the test if the lock is not had within `wait` seconds."""
    import pytest
    path = os.path.join(LOCK_DIR, f"rsp-fts-{name}.lock")
    fd = _lock(path, wait)
    if fd is None:
        pytest.fail(f"the lock {path} is held by another test process for more than {wait:.0f} s "
                    f"(or not readable by this user)")
    try:
        yield
    finally:
        os.close(fd)


def _fixed_port_lock_path(port):
    return os.path.join(LOCK_DIR, f"rsp-fts-port-{port}.lock")


@contextlib.contextmanager
def fixed_port_lock(port, wait=FIXED_PORT_WAIT):
    """Holds the lock on a fixed `port` (/tmp/rsp-fts-port-PORT.lock) for
    the with block, waiting (bounded) while a test of another suite holds
    it: two suites never use the port at once. Then waits (bounded) until
    the port can be bound as a listener binds it. Fails the test if the
    lock is not had within `wait` seconds, or if a process outside the
    suites holds the port; skips it only if this user may not bind it
    (a port below 1024 without root: the non-root tally)."""
    import pytest
    fd = _lock(_fixed_port_lock_path(port), wait)
    if fd is None:
        pytest.fail(f"the lock on port {port} ({_fixed_port_lock_path(port)}) is held by another test "
                    f"process for more than {wait:.0f} s (or not readable by this user)")
    try:
        deadline = time.monotonic() + 10.0
        while True:
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((LOOPBACK, port))
                break
            except PermissionError as e:
                pytest.skip(f"cannot bind {LOOPBACK}:{port} as this user: {e}")
            except OSError as e:
                if time.monotonic() >= deadline:
                    pytest.fail(f"{LOOPBACK}:{port} stays taken by a process outside the test suites: {e} "
                                f"(ss -ltnp 'sport = :{port}' names it)")
                time.sleep(0.1)
        yield port
    finally:
        os.close(fd)


# Ports below 1024 privileged_port has locked, held until the process exits.
_privileged = {}


def privileged_port():
    """A loopback port below 1024 (only root may bind one) that nothing is
    bound to, this process's alone until it exits (each is locked like a
    fixed port); None if there is none."""
    for port in range(1023, 600, -1):
        if port in _privileged:
            continue
        fd = _lock(_fixed_port_lock_path(port), 0)
        if fd is None:
            continue
        if _bindable(port, reuse=True):
            _privileged[port] = fd
            return port
        os.close(fd)
    return None


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
    reach a backend). The tables also hold every connection of the
    namespace waiting to close, tens of thousands when several suites run
    at once, and the kernel lists the listening sockets first (its
    listening hash, then the established one, TIME_WAIT included): so the
    reading stops at the first line that is not a listener, and the kernel
    never has to print the rest."""
    # "  12: 0100007F:1F90 00000000:0000 0A ...": local address:port,
    # remote address:port (zero for a listener), state 0A (TCP_LISTEN).
    suffix = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)  # the heading
                for line in f:
                    fields = line.split(None, 4)
                    if fields[3] != "0A":
                        break
                    if fields[1].endswith(suffix):
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


# -- the TCP sockets of this network namespace, without TIME_WAIT -----------

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_TIME_WAIT, _TCP_LISTEN = 6, 10
_ALL_BUT_TIME_WAIT = ((1 << 12) - 1) & ~(1 << _TCP_TIME_WAIT)


def _proc_hex(raw):
    """An address as /proc/net/tcp{,6} prints it: each 32-bit word of it
    in host order, %08X."""
    return "".join(f"{word:08X}" for (word,) in struct.iter_unpack("=I", raw))


def _sock_diag(family):
    """(inode, local port, remote "ADDR:PORT" as in /proc, state "0A",
    tx queue, rx queue) of each TCP socket of `family` but those in
    TIME_WAIT, from the kernel's sock_diag netlink interface (which leaves
    TIME_WAIT out itself, however many there are)."""
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, _ALL_BUT_TIME_WAIT) + bytes(48)
    header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
    size = 4 if family == socket.AF_INET else 16
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as s:
        s.sendto(header + request, (0, 0))
        while True:
            data = s.recv(1 << 16)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == _NLMSG_DONE:
                    return
                if kind == _NLMSG_ERROR:
                    (error,) = struct.unpack_from("=i", data, offset + 16)
                    raise OSError(-error, os.strerror(-error))
                # struct inet_diag_msg: family, state, timer, retrans; the
                # socket id (ports big-endian, then source and destination
                # addresses, interface, cookie); expires, rqueue, wqueue,
                # uid, inode.
                body = offset + 16
                state = data[body + 1]
                sport, dport = struct.unpack_from(">HH", data, body + 4)
                destination = data[body + 24:body + 24 + size]
                _, rqueue, wqueue, _, inode = struct.unpack_from("=IIIII", data, body + 52)
                if state == _TCP_LISTEN:
                    wqueue = 0  # sock_diag gives the backlog's size; /proc, 0
                yield (str(inode), sport, f"{_proc_hex(destination)}:{dport:04X}", f"{state:02X}", wqueue, rqueue)
                offset += (length + 3) & ~3


def tcp_table():
    """{socket inode: (local port, remote address:port as /proc/net/tcp
    prints it, state as it prints it ("01" ESTABLISHED, "0A" LISTEN), tx
    queue, rx queue)} for the TCP sockets of this network namespace but
    those in TIME_WAIT (which no process holds: their inode is 0). Read
    through sock_diag, not /proc/net/tcp: with several suites running, the
    table holds tens of thousands of TIME_WAIT lines (a soak test leaves up
    to 200,000 for a minute), and printing and parsing them took seconds
    of a test's teardown."""
    sockets = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            for inode, local, remote, state, tx, rx in _sock_diag(family):
                sockets[inode] = (local, remote, state, tx, rx)
        except OSError as e:
            if family == socket.AF_INET6 and e.errno in (errno.ENOENT, errno.EAFNOSUPPORT, errno.EINVAL):
                continue  # no IPv6 here
            raise
    return sockets
