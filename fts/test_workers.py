"""Workers (stage 13): with `workers = N` (N >= 2, or "auto": one per
online CPU) the process started is a master that forks N workers serving
the clients, sharing one listening socket (EPOLLEXCLUSIVE) or, with
`reuseport = true`, each on a socket of its own (SO_REUSEPORT). The
master logs `worker N started (pid P)` for each, replaces one that dies
(`worker N (pid P) was killed by signal 9; starting another`), hands
SIGHUP (an in-place reload of every worker; a new set of workers if
`listen` changed), SIGTERM (every worker drains, then the master exits 0)
and SIGUSR1 (every worker reopens the access log) on to them, runs the
active health checks itself and shares passive health; a worker exits
when the master dies. `workers = 1` (the default) is one process, as in
stage 12.

Which worker holds a client connection is read from /proc: the proxy's
end of the connection is the TCP socket whose local port is the listen
port and whose remote port is the client's (in /proc/net/tcp), and the
worker holding it has that socket's inode among its fds (/proc/PID/fd).
A test that needs a connection on every worker gets one this way:
- with one shared listening socket, it stops the other workers
  (SIGSTOP, waiting until /proc says they are stopped), connects, makes a
  request and lets them go on (SIGCONT): only the running worker can
  accept it (a stopped process is not waiting in epoll_wait, so an
  EPOLLEXCLUSIVE wake-up goes to the next one). Unloaded, the kernel
  hands connections to whichever worker waits first, mostly the same
  one (40 sequential connections: 37 and 3; 40 at once: 40 and 0, with
  a stand-in server), so "many connections" alone would prove nothing.
- with reuseport, the kernel spreads connections over the workers'
  sockets by a hash of the client's address and port: it opens
  connections (each from a new port) until every worker holds one
  (all of 64 on one of two sockets would be a 2^-63 chance).

Worker pids come from /proc/MASTER/task/MASTER/children. Every worker
pid a test saw is checked at teardown, after the proxies were stopped:
one still running is killed and reported (workers must not outlive
their master).

Reloads are done as in test_operations.py (its helpers are reused): the
config file is rewritten with proxy_arguments() (always with the same
workers setting) and the master gets SIGHUP; `reloaded CONFIG:
generation N` must be logged exactly once (by the master, not by every
worker). The spec does not say that this line waits for the workers, so
a connection kept open on a worker is asked until it stops answering
with the old backend (bounded), then must answer with the new one.
"""

import collections
import os
import re
import signal
import threading
import time

import pytest

from backends import hold_after_head
from checks import LOG_LINE, assert_logged_times, log_lines, served_by, wait_for_log, went_down
from client import ConnectionEnded, Conn, build_request, get
from load import SteadyLoad
from netutil import LOOPBACK, closed_ports, free_port, is_listening, wait_for
from pattern import assert_is_pattern
from proxy import (Proxy, backend_address, count_fds, fd_targets, pooled_fds, proxy_arguments, stable_fds,
                   tcp_sockets)
from test_access_log import read_lines
from test_operations import Reading, assert_refused, config_path, sighup, sighup_failing

pytestmark = pytest.mark.stage(13)

POLL_TIMEOUT = 5.0   # s: a bound on waiting for something that must happen (never a measurement)
WORKER_STARTED = re.compile(r"worker (\d+) started \(pid (\d+)\)")

# -- processes ---------------------------------------------------------------------

_seen_workers = {}  # pid -> start time (/proc/PID/stat field 22) of every worker a test saw


def wait_until(condition, what, timeout=POLL_TIMEOUT):
    """wait_for(), with `what` a function giving the message, so that it
    tells the state at the end of the wait rather than at its start."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what()}: not the case after {timeout} s")
        time.sleep(0.02)


def proc_stat(pid):
    """(state, ppid, start time) of process `pid` from /proc/PID/stat, or
    None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def running(pid, start=None):
    """True if process `pid` exists and has not exited (a zombie has: it is
    only waiting to be reaped); with `start`, only if it is that same
    process (not a later one that reused the pid)."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z" and (start is None or stat[2] == start)


def children(pid):
    """The pids of process `pid`'s children (empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return sorted(int(p) for p in f.read().split())
    except (FileNotFoundError, ProcessLookupError):
        return []


def track(pids):
    """Remembers workers for the teardown check (no_worker_left_behind)."""
    for pid in pids:
        stat = proc_stat(pid)
        if stat is not None:
            _seen_workers.setdefault(pid, stat[2])


def kill_leftovers(workers):
    """SIGKILLs those of `workers` ({pid: start time}) still running (a
    stopped one first gets SIGCONT); returns their pids."""
    left = [pid for pid, start in workers.items() if running(pid, start)]
    for pid in left:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    return left


@pytest.fixture(autouse=True)
def no_worker_left_behind():
    """After the test (and after start_proxy's teardown has stopped the
    masters): every worker the test saw must be gone within POLL_TIMEOUT;
    one still running is killed, and the test errors at teardown."""
    _seen_workers.clear()
    yield
    workers = dict(_seen_workers)
    _seen_workers.clear()
    deadline = time.monotonic() + POLL_TIMEOUT
    while any(running(pid, start) for pid, start in workers.items()) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = kill_leftovers(workers)
    if left:
        pytest.fail(f"worker processes {left} were still running after their master was stopped "
                    f"(killed now)", pytrace=False)


def worker_lines(proxy):
    """[(worker number, pid)] of every `worker N started (pid P)` log line."""
    found = []
    for line in log_lines(proxy, "started (pid"):
        m = WORKER_STARTED.search(line)
        if m:
            assert LOG_LINE.match(line), f"log line without a timestamp: {line!r}"
            found.append((int(m.group(1)), int(m.group(2))))
    return found


def started_workers(proxy, count):
    """Waits (bounded) until the master has `count` children; checks that
    each is an rsp worker logged once as `worker N started (pid P)` with N
    1..count. Returns the pids in the order of their worker numbers."""
    wait_until(lambda: len(children(proxy.pid)) == count,
               lambda: f"the master (pid {proxy.pid}) with {count} children (it has {children(proxy.pid)})")
    pids = children(proxy.pid)
    track(pids)
    wait_for(lambda: len(worker_lines(proxy)) >= count, f"{count} 'worker N started' lines", POLL_TIMEOUT)
    lines = worker_lines(proxy)
    assert sorted(pid for _, pid in lines) == pids, \
        f"the 'worker N started (pid P)' lines {lines} do not name the master's children {pids}\n{proxy.stderr()}"
    assert sorted(n for n, _ in lines) == list(range(1, count + 1)), f"worker numbers: {lines}"
    for pid in pids:
        assert os.readlink(f"/proc/{pid}/exe") == os.readlink(f"/proc/{proxy.pid}/exe"), \
            f"child {pid} of the master is not rsp"
    return [pid for _, pid in sorted(lines)]


def startup_fds(pid):
    """How many fds worker `pid` holds once it is serving. The master logs
    `worker N started` right after the fork, before the worker has set up
    its listener, whose spare fd (a second /dev/null: stdin is the first,
    chapter 02) comes a moment later: counted before that, the spare
    looked like a leak at the end of the test. So this waits (bounded) for
    the spare first."""
    def spares():
        return sum(1 for target in fd_links(pid) if target == "/dev/null")
    wait_for(lambda: spares() >= 2, f"worker {pid} holding its listener's spare fd", POLL_TIMEOUT)
    return count_fds(pid)


def wait_state(pid, states, what):
    wait_for(lambda: (proc_stat(pid) or ("gone",))[0] in states, f"worker {pid} {what}", POLL_TIMEOUT, pause=0.005)


def gone_or_zombie(pid):
    """True if process `pid` has exited (a zombie not yet reaped counts: a
    master that died leaves its children to be reaped by init)."""
    stat = proc_stat(pid)
    return stat is None or stat[0] == "Z"


# -- which worker holds a connection -------------------------------------------------

def fd_links(pid):
    """What the fds of process `pid` link to (none once it is gone)."""
    return list(fd_targets(pid).values())


def owners(sock, listen_port, pids):
    """Which of `pids` hold the proxy's end of client socket `sock` (an
    ESTABLISHED TCP socket on listen_port whose peer is sock's port)."""
    client_port = sock.getsockname()[1]
    inodes = {f"socket:[{inode}]" for inode, (local, remote, state, _, _) in tcp_sockets(os.getpid()).items()
              if local == listen_port and int(remote.rsplit(":", 1)[1], 16) == client_port and state == "01"}
    assert inodes, f"no socket of the proxy on port {listen_port} connected to client port {client_port}"
    return [pid for pid in pids if inodes & set(fd_links(pid))]


def owner(conn, listen_port, pids):
    """The one worker among `pids` holding the proxy's end of Conn `conn`."""
    found = owners(conn.sock, listen_port, pids)
    assert len(found) == 1, f"the connection from port {conn.sock.getsockname()[1]} is held by {found} of {pids}"
    return found[0]


def token_request(conn, token):
    """GET /echo?token=TOKEN on Conn `conn`; checks that the HTTP test
    backend got exactly that path (no cross-talk); returns the backend's name."""
    r = conn.get(f"/echo?token={token}")
    name = served_by(r)
    assert r.json()["path"] == f"/echo?token={token}", f"request {token} got the answer to {r.json()['path']}"
    return name


def answer_after_reload(conn, old, token):
    """The backend that answers on Conn `conn` once its worker has
    reloaded: asks (GET /echo?token=TOKEN-n) until the answer is not one
    of `old`, for at most POLL_TIMEOUT. The master logs `reloaded` and
    then tells the workers: a request right after the line may still meet
    the old generation (the spec does not say the line waits for them)."""
    deadline = time.monotonic() + POLL_TIMEOUT
    n = 0
    answered = token_request(conn, f"{token}-{n}")
    while answered in old and time.monotonic() < deadline:
        time.sleep(0.02)
        n += 1
        answered = token_request(conn, f"{token}-{n}")
    return answered


def conn_on_worker(port, pid, pids, path="/echo"):
    """A keep-alive connection to `port` accepted by worker `pid` (one
    listening socket shared by `pids`): the others are stopped while it
    connects and makes a request (GET `path`). Returns (Conn, Response)."""
    others = [p for p in pids if p != pid]
    stopped = []
    try:
        for p in others:
            os.kill(p, signal.SIGSTOP)
            stopped.append(p)
        for p in others:
            wait_state(p, "Tt", "stopped")
        conn = Conn(port, timeout=POLL_TIMEOUT)
        try:
            r = conn.get(path)
        except (TimeoutError, OSError, ConnectionEnded) as e:
            conn.close()
            pytest.fail(f"with the other workers {others} stopped, worker {pid} did not serve "
                        f"a new connection: {e!r}")
    finally:
        for p in stopped:
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
    held_by = owner(conn, port, pids)
    if held_by != pid:
        conn.close()
        pytest.fail(f"with {others} stopped, the connection was accepted by {held_by}, not {pid}")
    return conn, r


def conns_on_every_worker(port, pids, reuseport=False, path="/echo"):
    """{pid: (Conn, Response)}: a keep-alive connection accepted by each
    worker, each having made a request (GET `path`). See the module's
    docstring for how."""
    found = {}
    if not reuseport:
        for pid in pids:
            found[pid] = conn_on_worker(port, pid, pids, path)
        return found
    for _ in range(64):
        conn = Conn(port, timeout=POLL_TIMEOUT)
        r = conn.get(path)
        pid = owner(conn, port, pids)
        if pid in found:
            conn.close()
        else:
            found[pid] = (conn, r)
            if len(found) == len(pids):
                return found
    for conn, _ in found.values():
        conn.close()
    pytest.fail(f"64 connections all went to workers {sorted(found)} of {pids}")


def close_all(conns):
    for conn, _ in conns.values():
        conn.close()


def listening_inodes(port):
    """The inodes of the sockets in LISTEN state on `port` (this network namespace)."""
    return sorted(inode for inode, (local, _, state, _, _) in tcp_sockets(os.getpid()).items()
                  if local == port and state == "0A")


def listened_by(pid, port):
    """The inodes of the listening sockets on `port` that process `pid` holds."""
    inodes = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    return sorted(link for link in fd_links(pid) if link in inodes)


EPOLLEXCLUSIVE = 1 << 28


def watched_listeners(pid, port):
    """{inode: epoll events} of the listening sockets on `port` that
    process `pid` has registered in an epoll instance of its own (read
    from the "tfd: ... events: HEX ... ino: HEX" lines of the epoll fds'
    /proc/PID/fdinfo)."""
    listeners = {int(inode) for inode in listening_inodes(port)}
    found = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):
        return found
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[eventpoll]":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except OSError:
            continue
        for m in re.finditer(r"^tfd:\s*\d+\s+events:\s*([0-9a-f]+).*?\bino:\s*([0-9a-f]+)", info, re.M):
            inode = int(m.group(2), 16)
            if inode in listeners:
                found[inode] = int(m.group(1), 16)
    return found


def write_config(rsp, proxy, tmp_path, backends, port=None, **options):
    """Rewrites the proxy's config file (the one it re-reads on SIGHUP):
    listen port `port` (default: the one it was started with), these
    backends and options."""
    (path,) = proxy_arguments(rsp.stage, port or proxy.port, [backend_address(b) for b in backends],
                              str(tmp_path), options)
    assert path == config_path(proxy)
    return path


# -- starting ------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [None, 1], ids=["default", "workers=1"])
def test_one_worker_means_no_master(backend, start_proxy, workers):
    """Without workers, or with workers = 1, rsp is one process as in
    stage 12: no child process, no `worker N started` line, and it serves."""
    options = {} if workers is None else {"workers": workers}
    proxy = start_proxy(backend, **options)
    assert served_by(get(proxy.port, "/echo")) == "a"
    assert children(proxy.pid) == [], f"rsp forked {children(proxy.pid)}"
    assert not log_lines(proxy, "worker"), proxy.stderr()
    assert listened_by(proxy.pid, proxy.port), "the process started does not hold the listening socket"


@pytest.mark.parametrize("reuseport", [False, True], ids=["shared-socket", "reuseport"])
def test_two_workers_serve(make_backend, start_proxy, reuseport):
    """workers = 2: the master has exactly two children, rsp processes,
    each logged once as `worker N started (pid P)` (N 1 and 2), and the
    Started line is printed once. Without reuseport one socket listens on
    the port, and both workers watch it (epoll, with EPOLLEXCLUSIVE);
    with reuseport two, each worker watching its own; the master watches
    none (read from /proc/PID/fdinfo of the epoll fds). Each worker
    serves a connection of its own, and 200 requests from 8 threads at
    once (half on new connections, half on 20 keep-alive ones), each with
    a token of its own, all get their own answer. With reuseport the
    keep-alive connections (each from a new port) land on both workers."""
    a = make_backend("a")
    proxy = start_proxy(a, workers=2, reuseport=reuseport)
    pids = started_workers(proxy, 2)
    for pid in pids:
        assert proc_stat(pid)[1] == proxy.pid
    printed = proxy.stdout() + proxy.stderr()
    assert printed.count(f"Started. Listening on port {proxy.port}.") == 1, printed
    listeners = listening_inodes(proxy.port)
    assert len(listeners) == (2 if reuseport else 1), \
        f"{len(listeners)} sockets listen on port {proxy.port} (reuseport={reuseport}, 2 workers): {listeners}"

    def watching():
        return {pid: watched_listeners(pid, proxy.port) for pid in [proxy.pid] + pids}

    def as_specified():
        w = watching()
        if w[proxy.pid] or not all(len(w[pid]) == 1 for pid in pids):
            return False
        (first,), (second,) = (w[pid] for pid in pids)
        return first != second if reuseport else first == second
    deadline = time.monotonic() + POLL_TIMEOUT
    while not as_specified() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert as_specified(), (f"expected the master watching no listening socket and each worker one "
                            f"({'each its own' if reuseport else 'the same one'}); "
                            f"{{pid: {{inode: epoll events}}}}: {watching()}")
    if not reuseport:
        for pid, w in watching().items():
            for inode, events in w.items():
                assert events & EPOLLEXCLUSIVE, f"worker {pid} watches the shared socket without EPOLLEXCLUSIVE"

    each = conns_on_every_worker(proxy.port, pids, reuseport)
    try:
        for pid, (conn, r) in each.items():
            assert served_by(r) == "a"
            assert token_request(conn, f"worker-{pid}") == "a"
    finally:
        close_all(each)

    failures, placed = [], collections.Counter()
    lock = threading.Lock()

    def new_connections(t):
        for n in range(25):
            token = f"new-{t}-{n}"
            try:
                r = get(proxy.port, f"/echo?token={token}", timeout=10)
                if r.status != 200 or r.json()["path"] != f"/echo?token={token}":
                    raise AssertionError(f"{r!r} {r.raw[:200]!r}")
            except Exception as e:
                with lock:
                    failures.append(f"{token}: {e!r}")

    def keepalive(t):
        conn = None
        try:
            for n in range(25):
                token = f"ka-{t}-{n}"
                if n % 5 == 0:
                    if conn is not None:
                        conn.close()
                    conn = Conn(proxy.port, timeout=10)
                try:
                    token_request(conn, token)
                    if n % 5 == 0:
                        where = owners(conn.sock, proxy.port, pids)
                        with lock:
                            placed[tuple(where)] += 1
                except Exception as e:
                    with lock:
                        failures.append(f"{token}: {e!r}")
        finally:
            if conn is not None:
                conn.close()

    before = a.requests
    threads = [threading.Thread(target=new_connections, args=(t,), daemon=True) for t in range(4)]
    threads += [threading.Thread(target=keepalive, args=(t,), daemon=True) for t in range(4, 8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a client hung"
    assert not failures, f"{len(failures)} failed requests, e.g.: {failures[:5]}"
    assert a.requests - before == 200, a.hits
    assert set(placed) <= {(pid,) for pid in pids}, f"connections not held by exactly one worker: {placed}"
    if reuseport:
        assert len(placed) == 2, f"20 keep-alive connections all went to one worker: {placed}"
    assert children(proxy.pid) == sorted(pids), "the workers changed"


def test_shared_socket_takes_turns(make_backend, start_proxy):
    """workers = 2 on one shared socket, under the lightest load there is:
    64 keep-alive connections opened one after another, each answered
    before the next is opened, all held. With EPOLLEXCLUSIVE the kernel
    wakes the first waiting worker in the order they added the socket, so
    without anything else one worker accepts them all; rsp's workers go to
    the back of the line every 16 accepts (listener.c), so each of the two
    holds at least a quarter of them."""
    a = make_backend("a")
    proxy = start_proxy(a, workers=2, keepalive_requests=1000)
    pids = started_workers(proxy, 2)
    held, placed = [], collections.Counter()
    try:
        for n in range(64):
            conn = Conn(proxy.port, timeout=10)
            held.append(conn)
            assert token_request(conn, f"turn-{n}") == "a"
            where = owners(conn.sock, proxy.port, pids)
            assert len(where) == 1, f"connection {n} held by {where}"
            placed[where[0]] += 1
    finally:
        for conn in held:
            conn.close()
    assert set(placed) == set(pids) and min(placed.values()) >= 16, \
        f"64 connections, one at a time, split {dict(placed)} between the two workers"


def test_workers_auto_is_one_per_cpu(backend, start_proxy):
    """workers = "auto" starts one worker per online CPU (at most 64)."""
    cpus = min(os.sysconf("SC_NPROCESSORS_ONLN"), 64)
    if cpus < 2:
        pytest.skip(f"{cpus} online CPU: auto means one process, no workers")
    proxy = start_proxy(backend, workers="auto")
    pids = started_workers(proxy, cpus)
    assert len(pids) == cpus
    assert served_by(get(proxy.port, "/echo")) == "a"


# -- a worker that dies ---------------------------------------------------------------

@pytest.mark.parametrize("reuseport", [False, True], ids=["shared-socket", "reuseport"])
def test_killed_worker_is_replaced(make_backend, start_proxy, reuseport):
    """kill -9 of worker 1: the master (same pid, still running) logs
    `worker 1 (pid P) was killed by signal 9; starting another` once,
    reaps it, and starts a replacement (a new pid, logged as started);
    the master then has two children again, worker 2 untouched, and both
    serve; 20 requests on new connections made right after the kill all
    succeed (with reuseport too, where some are hashed to the socket the
    dead worker watched)."""
    a = make_backend("a")
    proxy = start_proxy(a, workers=2, reuseport=reuseport)
    first, second = started_workers(proxy, 2)
    os.kill(first, signal.SIGKILL)
    line = f"worker 1 (pid {first}) was killed by signal 9; starting another"
    wait_for_log(proxy, line, POLL_TIMEOUT)
    for n in range(20):
        assert served_by(get(proxy.port, f"/echo?n={n}", timeout=POLL_TIMEOUT)) == "a"
    wait_until(lambda: len(children(proxy.pid)) == 2 and first not in children(proxy.pid),
               lambda: f"two children of the master again, without {first} (it has {children(proxy.pid)})")
    now = children(proxy.pid)
    track(now)
    assert second in now, f"worker 2 (pid {second}) was replaced too: {now}"
    (replacement,) = set(now) - {second}
    assert proxy.alive() and proxy.process.pid == proxy.pid
    assert proc_stat(replacement)[1] == proxy.pid
    wait_for(lambda: proc_stat(first) is None, f"the killed worker {first} reaped", POLL_TIMEOUT)
    assert_logged_times(proxy, line, 1)
    # The master logs the start after fork() returns: the child can be in
    # /proc a moment before the line is written.
    wait_for(lambda: any(pid == replacement for _, pid in worker_lines(proxy)),
             f"a 'worker N started (pid {replacement})' line\n{proxy.stderr()}", POLL_TIMEOUT)
    each = conns_on_every_worker(proxy.port, [replacement, second], reuseport)
    try:
        for pid, (conn, r) in each.items():
            assert served_by(r) == "a"
            assert token_request(conn, f"after-{pid}") == "a"
    finally:
        close_all(each)


def test_workers_exit_when_the_master_is_killed(rsp, backend, tmp_path):
    """kill -9 of the master: both workers exit (within a bounded wait)
    and nothing listens on the port any more. (This test starts and
    cleans up the proxy itself: start_proxy's teardown would report the
    master's death.)"""
    port = free_port()
    args = proxy_arguments(rsp.stage, port, [backend_address(backend)], str(tmp_path), {"workers": 2})
    proxy = Proxy(rsp.binary, args, port, str(tmp_path))
    workers = {}
    try:
        pids = started_workers(proxy, 2)
        workers = {pid: proc_stat(pid)[2] for pid in pids}
        assert served_by(get(port, "/echo")) == "a"
        proxy.process.kill()
        proxy.process.wait(POLL_TIMEOUT)
        wait_for(lambda: all(gone_or_zombie(pid) for pid in pids),
                 f"the workers {pids} gone after the master was killed", POLL_TIMEOUT)
        wait_for(lambda: not is_listening(port), f"nothing listening on port {port}", POLL_TIMEOUT)
    finally:
        kill_leftovers(workers)
        proxy.stop()


# -- reloads --------------------------------------------------------------------------

@pytest.mark.parametrize("reuseport", [False, True], ids=["shared-socket", "reuseport"])
def test_reload_reaches_every_worker(make_backend, start_proxy, rsp, tmp_path, reuseport):
    """workers = 2, a keep-alive connection on each worker, both served by
    a. The config is rewritten to name b, SIGHUP to the master:
    `reloaded CONFIG: generation 2` logged once; the next request on each
    connection (so: on each worker) goes to b, and so do new connections
    on each worker and 20 more on new connections; the workers are the
    same processes (an in-place reload) on the same listening sockets.
    Then a broken config: `reload failed`, and b still serves on every
    worker, workers untouched; fixed (back to a), generation 3 on every
    worker."""
    a, b = make_backend("a"), make_backend("b")
    options = {"workers": 2, "reuseport": reuseport}
    proxy = start_proxy(a, **options)
    pids = started_workers(proxy, 2)
    listeners = listening_inodes(proxy.port)
    held = conns_on_every_worker(proxy.port, pids, reuseport)
    try:
        assert {served_by(r) for _, r in held.values()} == {"a"}

        write_config(rsp, proxy, tmp_path, [b], **options)
        sighup(proxy, 2)
        for pid, (conn, _) in held.items():
            assert answer_after_reload(conn, {"a"}, f"kept-{pid}") == "b", \
                f"worker {pid} still serves the old config"
        fresh = conns_on_every_worker(proxy.port, pids, reuseport)
        try:
            for pid, (_, r) in fresh.items():
                assert served_by(r) == "b", f"worker {pid}: a new connection served by the old config"
        finally:
            close_all(fresh)
        assert [served_by(get(proxy.port, "/echo")) for _ in range(20)] == ["b"] * 20
        assert children(proxy.pid) == sorted(pids), "the workers were replaced: not an in-place reload"
        assert listening_inodes(proxy.port) == listeners, "the listening sockets were replaced"

        path = write_config(rsp, proxy, tmp_path, [a], **options)
        with open(path, "a") as f:
            f.write("backends = = 1\n")
        sighup_failing(proxy)
        for pid, (conn, _) in held.items():
            assert token_request(conn, f"broken-{pid}") == "b", f"worker {pid} after a failed reload"
        fresh = conns_on_every_worker(proxy.port, pids, reuseport)
        try:
            for pid, (_, r) in fresh.items():
                assert served_by(r) == "b", f"worker {pid} after a failed reload"
        finally:
            close_all(fresh)
        assert children(proxy.pid) == sorted(pids), "a failed reload touched the workers"
        assert_logged_times(proxy, "reload failed", 1)

        write_config(rsp, proxy, tmp_path, [a], **options)
        sighup(proxy, 3)
        for pid, (conn, _) in held.items():
            assert answer_after_reload(conn, {"b"}, f"fixed-{pid}") == "a", f"worker {pid} after the third generation"
    finally:
        close_all(held)
    assert children(proxy.pid) == sorted(pids)


@pytest.mark.parametrize("later", ["next-version", "half-written"])
def test_workers_reload_the_config_the_master_read(make_backend, start_proxy, rsp, tmp_path, later):
    """The generation the master announces is the one every worker serves,
    even if the file changes again before a worker got to it (a worker
    busy with something else; here: stopped with SIGSTOP while the master
    reloads). workers = 2, a connection on each, served by a; the config
    is rewritten to name b, SIGHUP; once the master has logged
    generation 2, the file is rewritten again (naming c, not signalled;
    or cut off in the middle, as an editor's non-atomic save leaves it
    for a moment), and the stopped worker goes on: both workers serve b
    (each asked until it no longer answers with a), as the master said,
    and none logs a failed reload."""
    a, b, c = make_backend("a"), make_backend("b"), make_backend("c")
    proxy = start_proxy(a, workers=2)
    pids = started_workers(proxy, 2)
    held = conns_on_every_worker(proxy.port, pids)
    busy = pids[1]
    try:
        write_config(rsp, proxy, tmp_path, [b], workers=2)
        os.kill(busy, signal.SIGSTOP)
        try:
            wait_state(busy, "Tt", "stopped")
            sighup(proxy, 2)
            path = write_config(rsp, proxy, tmp_path, [c], workers=2)
            if later == "half-written":
                with open(path, "r+") as f:
                    text = f.read()
                    f.seek(0)
                    f.truncate()
                    f.write(text[:len(text) // 2])
        finally:
            os.kill(busy, signal.SIGCONT)
        for pid, (conn, _) in held.items():
            answered = answer_after_reload(conn, {"a"}, f"after-{pid}")
            assert answered == "b", (f"worker {pid} serves {answered}, not b: the config the master read "
                                     f"and announced as generation 2\n{proxy.stderr()}")
        assert not log_lines(proxy, "reload failed"), proxy.stderr()
    finally:
        close_all(held)


def test_twenty_reloads_under_load(make_keepalive_backend, start_proxy, rsp, tmp_path):
    """workers = 2. Six clients (three on keep-alive connections, three
    opening a connection per request) send GETs the whole time while the
    config is reloaded 20 times, alternating between backends {a1, a2} and
    {b}: not one request fails, every response is a complete 200 from one
    of them, both sets served. After the last reload (back to {a1, a2})
    every worker serves only a1 and a2; the workers are the ones started;
    the master holds no more fds than before (the teardown checks it too)
    and each worker, once its clients are gone, no more than at startup
    besides idle pooled backend connections."""
    a1, a2, b = (make_keepalive_backend(name) for name in ("a1", "a2", "b"))
    sets = [[a1, a2], [b]]
    names = {"a1", "a2", "b"}
    proxy = start_proxy(*sets[0], workers=2)
    pids = started_workers(proxy, 2)
    master_fds = count_fds(proxy.pid)
    worker_fds = {pid: startup_fds(pid) for pid in pids}
    with SteadyLoad(proxy.port, names, keepalive=3, fresh=3, reconnect_every=10) as load:
        for i in range(1, 21):
            time.sleep(0.1)
            write_config(rsp, proxy, tmp_path, sets[i % 2], workers=2)
            sighup(proxy, i + 1)
        time.sleep(0.2)
    load.assert_clean()
    served = load.served
    assert served["b"] > 0 and served["a1"] + served["a2"] > 0, served
    assert sum(served.values()) >= 200, f"too little load to mean anything: {served}"
    assert children(proxy.pid) == sorted(pids), "the workers were replaced"
    each = conns_on_every_worker(proxy.port, pids, path="/cl?size=10")
    try:
        for pid, (conn, r) in each.items():
            answered = {served_by(r)} | {served_by(conn.get("/cl?size=10")) for _ in range(3)}
            assert answered <= {"a1", "a2"}, f"worker {pid} after the last reload: {answered}"
    finally:
        close_all(each)
    wait_until(lambda: count_fds(proxy.pid) <= master_fds,
               lambda: f"the master back to its {master_fds} fds (it has {count_fds(proxy.pid)})")

    def worker_settled(pid):
        groups = pooled_fds(pid, proxy.port).values()
        return (all(len(fds) <= proxy.pooled for fds in groups)
                and count_fds(pid) - sum(len(fds) for fds in groups) <= worker_fds[pid])

    for pid in pids:
        wait_until(lambda: worker_settled(pid),
                   lambda: f"worker {pid} back to its {worker_fds[pid]} fds of startup besides pooled "
                           f"connections (it has {count_fds(pid)}, pooled {pooled_fds(pid, proxy.port)})")


def test_reload_moving_listen_replaces_workers(make_backend, start_proxy, rsp, tmp_path):
    """workers = 2, a slow response in flight (80 pieces of 1000 bytes, one
    every 50 ms) and an idle keep-alive connection on the old port; a
    reload moves listen to a new port: the new port serves (a new set of
    workers, logged as started), the old workers drain: the idle
    connection is closed, the response in flight ends byte-exact, and
    then they exit (reaped by the master). A connection to the old port
    during the drain never hangs (it is refused, or answered); once the
    old workers are gone it is refused."""
    a = make_backend("a")
    proxy = start_proxy(a, workers=2)
    old_pids = started_workers(proxy, 2)
    old, new = proxy.port, free_port()
    pieces = 80
    client = Reading(old, build_request(old, "GET", f"/drip?chunks={pieces}&size=1000&delay=0.05"))
    idle = Conn(old, timeout=POLL_TIMEOUT)
    try:
        assert served_by(idle.get("/echo")) == "a"
        client.wait_for_bytes(2000)
        write_config(rsp, proxy, tmp_path, [a], listen=f"{LOOPBACK}:{new}", workers=2)
        sighup(proxy, 2)
        wait_for(lambda: is_listening(new), f"the new port {new} listening", POLL_TIMEOUT)
        assert served_by(get(new, "/echo")) == "a"
        assert idle.state(POLL_TIMEOUT) == "eof", "the old worker kept an idle keep-alive connection open"
    finally:
        idle.close()
    try:
        r = get(old, "/echo", timeout=2)
    except ConnectionRefusedError:
        pass
    except TimeoutError as e:
        pytest.fail(f"a connection to the old port hung during the drain: {e}")
    else:
        # Refused, answered, or (queued on a listener closed meanwhile) reset: not left hanging.
        assert r.status == 200 or (r.reset and not r.raw), \
            f"a connection to the old port during the drain: {r!r} {r.raw[:200]!r}"
    r = client.response(POLL_TIMEOUT + pieces * 0.05)
    assert r.status == 200 and not r.reset and r.header("X-Backend") == "a", r
    assert_is_pattern(r.body, pieces * 1000)
    proxy.port = new  # for the teardown's look at its sockets
    wait_until(lambda: len(children(proxy.pid)) == 2 and not set(children(proxy.pid)) & set(old_pids),
               lambda: f"two new workers and the old ones {old_pids} gone (children: {children(proxy.pid)})")
    new_pids = children(proxy.pid)
    track(new_pids)
    for pid in old_pids:
        wait_for(lambda: proc_stat(pid) is None, f"old worker {pid} reaped", POLL_TIMEOUT)
    # Logged by the master after fork() returns: wait for the lines too.
    wait_for(lambda: set(new_pids) <= {pid for _, pid in worker_lines(proxy)},
             f"new workers {new_pids} all logged as started", POLL_TIMEOUT)
    assert_refused(old)
    each = conns_on_every_worker(new, new_pids)
    try:
        for pid, (_, r) in each.items():
            assert served_by(r) == "a"
    finally:
        close_all(each)


# -- stopping --------------------------------------------------------------------------

def test_sigterm_drains_every_worker(make_backend, start_proxy):
    """workers = 2, an idle keep-alive connection on each worker and a slow
    response in flight (80 pieces of 1000 bytes, one every 50 ms); SIGTERM
    to the master: both idle connections are closed, the port stops
    listening (a connect is refused), the response completes byte-exact,
    then the master exits with status 0, and by then no worker is left
    running."""
    a = make_backend("a")
    proxy = start_proxy(a, workers=2)
    pids = started_workers(proxy, 2)
    idle = conns_on_every_worker(proxy.port, pids)
    pieces = 80
    try:
        client = Reading(proxy.port, build_request(proxy.port, "GET", f"/drip?chunks={pieces}&size=1000&delay=0.05"))
        client.wait_for_bytes(2000)
        proxy.process.send_signal(signal.SIGTERM)
        for pid, (conn, _) in idle.items():
            assert conn.state(POLL_TIMEOUT) == "eof", f"worker {pid} kept an idle keep-alive connection open"
        assert_refused(proxy.port)
        r = client.response(POLL_TIMEOUT + pieces * 0.05)
    finally:
        close_all(idle)
    assert r.status == 200 and not r.reset, r
    assert_is_pattern(r.body, pieces * 1000)
    assert proxy.wait_exit(POLL_TIMEOUT) == 0
    left = [pid for pid in pids if not gone_or_zombie(pid)]
    assert not left, f"the master exited while workers {left} still ran"


# -- health ------------------------------------------------------------------------------

def test_passive_health_is_shared(make_backend, start_proxy):
    """A pool of a closed port and a live backend, round robin, down_time
    30 s, workers = 2: 10 requests on a connection on each worker, then 20
    on new connections, all get 200 from the live backend; the closed
    port's `backend HOST:PORT is down` line is logged exactly once (each
    worker, picking in turn, would try it once if each judged it alone)."""
    (dead,) = closed_ports(1)
    live = make_backend("live")
    proxy = start_proxy((LOOPBACK, dead), live, balance="round_robin", down_time=30, workers=2)
    pids = started_workers(proxy, 2)
    each = conns_on_every_worker(proxy.port, pids)
    try:
        for pid, (conn, r) in each.items():
            assert served_by(r) == "live"
            for n in range(10):
                assert token_request(conn, f"{pid}-{n}") == "live", f"worker {pid}"
    finally:
        close_all(each)
    assert [served_by(get(proxy.port, "/echo")) for _ in range(20)] == ["live"] * 20
    assert_logged_times(proxy, went_down(LOOPBACK, dead), 1)


def health_check_sockets(pid, port):
    """How many established TCP connections to 127.0.0.1:port process
    `pid` holds: those among its fds both before and after the socket
    table is read (through sock_diag: reading /proc/net/tcp took seconds
    on a busy machine, longer than a health check connection lives, so
    the fds and the table never agreed)."""
    remote = f"0100007F:{port:04X}"
    stable, table = stable_fds(pid, lambda: tcp_sockets(os.getpid()))
    held = set(stable.values())
    return sum(1 for inode, (_, peer, state, _, _) in table.items()
               if peer == remote and state == "01" and f"socket:[{inode}]" in held)


def test_active_health_checks_run_in_the_master(make_backend, make_raw_backend, start_proxy):
    """Health checks with workers = 2 run once, in the master: the
    `health checks: GET /healthz ...` line is logged once for the pool;
    a backend whose check fails is logged down once (and up once when it
    passes again), and every worker follows: while it is down no worker
    sends it a request, once up both do. A third backend never answers
    its check (it reads the request and holds the connection until the
    check's timeout, 0.5 s, ends it): the connection is the master's,
    never a worker's (looked at 20 times)."""
    a, b = make_backend("a"), make_backend("b")
    silent = make_raw_backend(hold_after_head)
    check = {"path": "/healthz", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1}
    a.health_status = 503
    proxy = start_proxy(a, b, silent, health_check=check, balance="round_robin", workers=2)
    pids = started_workers(proxy, 2)
    a_name = "%s:%d" % backend_address(a)
    silent_name = "%s:%d" % backend_address(silent)
    wait_for_log(proxy, f"backend {a_name} is down: health check failed", POLL_TIMEOUT)
    wait_for_log(proxy, f"backend {silent_name} is down: health check failed", POLL_TIMEOUT)
    assert_logged_times(proxy, "health checks: GET /healthz", 1)

    wait_for(lambda: health_check_sockets(proxy.pid, silent.port) >= 1,
             "the master holding a health check connection to the silent backend", POLL_TIMEOUT)
    for _ in range(20):
        held = {pid: health_check_sockets(pid, silent.port) for pid in pids}
        assert not any(held.values()), f"workers hold health check connections: {held}"
        time.sleep(0.02)

    each = conns_on_every_worker(proxy.port, pids)
    try:
        for pid, (conn, r) in each.items():
            answered = {served_by(r)} | {token_request(conn, f"{pid}-down-{n}") for n in range(6)}
            assert answered == {"b"}, f"worker {pid} while a is down (the silent one never passed): {answered}"
        a.health_status = 200
        wait_for_log(proxy, f"backend {a_name} is up: health check passed", POLL_TIMEOUT)
        for pid, (conn, _) in each.items():
            answered = {token_request(conn, f"{pid}-up-{n}") for n in range(6)}
            assert answered == {"a", "b"}, f"worker {pid} once a is up again: {answered}"
    finally:
        close_all(each)
    assert_logged_times(proxy, f"backend {a_name} is down", 1)
    assert_logged_times(proxy, f"backend {a_name} is up", 1)
    assert_logged_times(proxy, f"backend {silent_name} is down", 1)
    assert_logged_times(proxy, "health checks: GET /healthz", 1)


# -- the access log ------------------------------------------------------------------------

def logged_paths(path):
    """The request targets of the access log's lines ("GET TARGET HTTP/1.1")."""
    found = []
    for line in read_lines(path):
        m = re.search(r'"GET (\S+) HTTP/1\.1"', line)
        assert m, f"not an access log line for a GET: {line!r}"
        found.append(m.group(1))
    return found


def test_sigusr1_reopens_the_access_log_in_every_worker(backend, start_proxy, tmp_path):
    """workers = 2 writing one access log: 5 requests on a connection on
    each worker give 10 whole lines (both append, neither overwrites).
    The log is renamed, SIGUSR1 to the master: every worker reopens it
    (its fd then names the configured path, none the renamed file), and
    the next requests on each worker go to the new file; the renamed file
    keeps exactly the lines from before."""
    log_path = str(tmp_path / "access.log")
    rotated = log_path + ".1"
    proxy = start_proxy(backend, access_log=log_path, workers=2)
    pids = started_workers(proxy, 2)
    each = conns_on_every_worker(proxy.port, pids, path="/echo?first")
    try:
        before = ["/echo?first"] * 2
        for pid, (conn, _) in each.items():
            for n in range(4):
                token_request(conn, f"before-{pid}-{n}")
                before.append(f"/echo?token=before-{pid}-{n}")
        wait_for(lambda: len(read_lines(log_path)) >= 10, "10 lines in the access log", POLL_TIMEOUT)
        assert sorted(logged_paths(log_path)) == sorted(before)

        os.rename(log_path, rotated)
        proxy.process.send_signal(signal.SIGUSR1)

        def reopened(pid):
            links = fd_links(pid)
            return log_path in links and rotated not in links

        for pid in pids:
            wait_for(lambda: reopened(pid), f"worker {pid} holding the new {log_path} and not the renamed file",
                     POLL_TIMEOUT)
        after = []
        for pid, (conn, _) in each.items():
            for n in range(3):
                token_request(conn, f"after-{pid}-{n}")
                after.append(f"/echo?token=after-{pid}-{n}")
        wait_for(lambda: len(read_lines(log_path)) >= 6, "6 lines in the new access log", POLL_TIMEOUT)
        assert sorted(logged_paths(log_path)) == sorted(after)
        assert sorted(logged_paths(rotated)) == sorted(before)
    finally:
        close_all(each)
