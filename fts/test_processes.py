"""Processes as an operator sees them (stage 19): with workers, ps tells
the master from the workers as it does nginx's ("rsp: master process
CONFIG", "rsp: worker process N"), while rsp alone keeps its command
line; the process name (/proc/PID/comm, what pkill matches) stays rsp.
`pid_file` holds the master's (or rsp alone's) pid while it runs, is
root's when rsp drops root, goes at a clean exit, and refuses a second
rsp while the first runs (a stale one is replaced). A signal sent to a
worker itself (pkill, systemctl kill) is no reload: SIGHUP is logged
and ignored, SIGTERM stops that worker gracefully (the master replaces
it), SIGUSR1 reopens its access log. With $NOTIFY_SOCKET (systemd's
Type=notify) rsp sends READY=1 once it serves, RELOADING=1 with
MONOTONIC_USEC then READY=1 around a reload, STOPPING=1 when it stops:
the test binds the datagram socket itself and reads them.

The command line is read from /proc/PID/cmdline, as ps reads it: the
title, then NUL bytes (the rest of the memory argv had). Worker pids come
from the master's children and its `worker N started (pid P)` lines
(test_workers.started_workers), whose teardown check (every worker gone
after its master) applies here too.
"""

import os
import re
import signal
import socket
import time

import pytest

from checks import assert_logged_times, assert_serves, log_lines, nobody, served_by, wait_for_log
from client import get
from netutil import free_port, wait_for
from proxy import proxy_arguments, run_rsp
from test_install import service_settings
from test_operations import sighup
from test_workers import (children, no_worker_left_behind, started_workers, track,  # noqa: F401 (autouse)
                          worker_lines, write_config)

UNIT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dist", "rsp.service.in")
POLL_TIMEOUT = 5.0   # s: a bound on waiting for something that must happen (never a measurement)

pytestmark = pytest.mark.stage(19)


def cmdline(pid):
    """Process `pid`'s command line as ps shows it: the arguments joined
    by spaces (trailing NULs dropped)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


def comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def test_master_and_workers_titled_as_nginx(backend, start_proxy):
    """workers = 2: the master's command line is "rsp: master process
    CONFIG" (the config path as given), each worker's "rsp: worker process
    N" with N its number in the log's `worker N started`; the name every
    one of them has in /proc/PID/comm is still the binary's."""
    proxy = start_proxy(backend, workers=2)
    pids = started_workers(proxy, 2)
    assert_serves(proxy)
    assert cmdline(proxy.pid) == f"rsp: master process {proxy.args[0]}"
    for n, pid in enumerate(pids, start=1):
        assert cmdline(pid) == f"rsp: worker process {n}", f"worker {n} (pid {pid})"
    name = os.path.basename(proxy.binary)[:15]
    assert [comm(pid) for pid in [proxy.pid] + pids] == [name] * 3


def test_rsp_alone_keeps_its_command_line(backend, start_proxy):
    """workers = 1: one process, whose command line is the one it was
    started with."""
    proxy = start_proxy(backend)
    assert_serves(proxy)
    assert cmdline(proxy.pid) == " ".join([proxy.binary] + proxy.args)


@pytest.mark.parametrize("workers", [1, 2], ids=["alone", "master"])
def test_started_line_is_a_timestamped_log_line(backend, start_proxy, workers):
    """The "Started. Listening on port N." line is a line of the error log
    like the others (date, time, "rsp: "; the journal under systemd), once,
    and nothing at all goes to stdout (up to stage 18 it was an untimestamped
    line on stdout, the only one)."""
    proxy = start_proxy(backend, workers=workers)
    assert_serves(proxy)
    started = [line for line in proxy.stderr().splitlines() if "Started." in line]
    assert len(started) == 1, proxy.stderr()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d rsp: Started\. Listening on port "
                        + str(proxy.port) + r"\.", started[0]), started[0]
    assert proxy.stdout() == "", proxy.stdout()


@pytest.mark.parametrize("workers", [1, 2], ids=["alone", "master"])
def test_pid_file_holds_the_pid_while_rsp_runs(backend, start_proxy, tmp_path, workers):
    """pid_file: once rsp serves, the file holds the pid of the process
    started (the master, with workers) and a newline, nothing else is
    left in its directory (it was written beside and renamed); at SIGTERM
    rsp exits 0 and the file is gone."""
    directory = tmp_path / "run"
    directory.mkdir()
    path = directory / "rsp.pid"
    proxy = start_proxy(backend, workers=workers, pid_file=str(path))
    assert_serves(proxy)
    assert path.read_text() == f"{proxy.pid}\n"
    assert os.listdir(directory) == ["rsp.pid"]
    os.kill(proxy.pid, signal.SIGTERM)
    assert proxy.wait_exit(10) == 0, proxy.describe()
    assert not path.exists(), "the pid file is still there after a clean exit"


def test_pid_file_of_a_running_rsp_refuses_a_second(rsp, backend, start_proxy, tmp_path):
    """A second rsp with the same pid_file (on another port) while the
    first runs: it exits 1 saying "already running as PID N" with the
    first's pid, and the file still names the first, which still serves."""
    path = tmp_path / "rsp.pid"
    first = start_proxy(backend, pid_file=str(path))
    (config,) = proxy_arguments(rsp.stage, free_port(), [(backend.host, backend.port)], str(tmp_path),
                                {"pid_file": str(path)})
    second = run_rsp(rsp, [config], str(tmp_path))
    assert second.returncode == 1, f"exit {second.returncode}\n{second.stderr}"
    assert f"already running as PID {first.pid}" in second.stderr, second.stderr
    assert path.read_text() == f"{first.pid}\n"
    assert_serves(first)


@pytest.mark.parametrize("stale", ["dead", "other program", "garbage"])
def test_stale_pid_file_is_replaced(backend, start_proxy, tmp_path, stale):
    """A pid file left behind (its process gone, a pid now some other
    program's, or no pid at all) does not stop rsp: it is replaced."""
    path = tmp_path / "rsp.pid"
    path.write_text({"dead": "4194304\n",  # above pid_max's ceiling: never a process
                     "other program": f"{os.getpid()}\n",
                     "garbage": "not a pid\n"}[stale])
    proxy = start_proxy(backend, pid_file=str(path))
    assert path.read_text() == f"{proxy.pid}\n"


def test_pid_file_is_roots(backend, start_proxy, tmp_path):
    """Started as root with user = "nobody": the pid file is written
    before root is given up, so it is root's (as nginx's), mode 0644."""
    nobody()
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "rsp.pid"
    proxy = start_proxy(backend, user="nobody", pid_file=str(path))
    st = os.stat(path)
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o644)
    assert path.read_text() == f"{proxy.pid}\n"


# -- signals sent to a worker directly ----------------------------------------------------


def test_sighup_to_a_worker_is_ignored_with_one_line(make_backend, start_proxy, rsp, tmp_path):
    """SIGHUP sent to worker 1 itself (what `pkill -HUP rsp` and `systemctl
    kill -s HUP` do to every process): it logs once "worker 1: SIGHUP is
    for the master (PID M): ignored", reloads nothing (no "reload failed",
    no "config reloaded") and goes on serving, the same process. SIGHUP
    to the master then still reloads every worker."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a, workers=2)
    pids = started_workers(proxy, 2)
    os.kill(pids[0], signal.SIGHUP)
    wait_for_log(proxy, "SIGHUP is for the master", POLL_TIMEOUT)
    assert_logged_times(proxy, f"worker 1: SIGHUP is for the master (PID {proxy.pid}): ignored", 1)
    assert not log_lines(proxy, "reload"), proxy.stderr()
    for _ in range(4):
        assert_serves(proxy)
    assert children(proxy.pid) == sorted(pids), "a worker was replaced"

    write_config(rsp, proxy, tmp_path, [b], workers=2)
    sighup(proxy, 2)
    for n in (1, 2):
        wait_for_log(proxy, f"worker {n}: config reloaded: generation 2", POLL_TIMEOUT)
    assert [served_by(get(proxy.port, "/echo")) for _ in range(10)] == ["b"] * 10
    assert not log_lines(proxy, "reload failed"), proxy.stderr()
    assert_logged_times(proxy, "SIGHUP is for the master", 1)


def test_sigterm_to_a_worker_stops_it_and_the_master_replaces_it(backend, start_proxy):
    """SIGTERM sent to worker 1 itself: it stops gracefully (exit status 0),
    as an nginx worker does, and the master starts another worker 1; rsp
    serves throughout (worker 2 was there)."""
    proxy = start_proxy(backend, workers=2)
    pids = started_workers(proxy, 2)
    os.kill(pids[0], signal.SIGTERM)
    wait_for_log(proxy, f"worker 1 (pid {pids[0]}) exited with status 0", POLL_TIMEOUT)
    assert_serves(proxy)
    wait_for(lambda: len(worker_lines(proxy)) == 3, "a third 'worker N started' line", POLL_TIMEOUT)
    assert worker_lines(proxy)[2][0] == 1, worker_lines(proxy)
    track([worker_lines(proxy)[2][1]])
    assert_serves(proxy)


def test_pkill_term_is_one_graceful_stop(make_backend, start_proxy):
    """SIGTERM to the master and to every worker at once (`pkill rsp`):
    each worker stops gracefully, once (the second side's signal is not
    taken as "stop now"), and rsp exits 0."""
    proxy = start_proxy(make_backend("a"), workers=2)
    pids = started_workers(proxy, 2)
    for pid in pids + [proxy.pid]:
        os.kill(pid, signal.SIGTERM)
    assert proxy.wait_exit(10) == 0, proxy.describe()
    assert not log_lines(proxy, "stopping now"), proxy.stderr()
    assert not log_lines(proxy, "stop now"), proxy.stderr()


def test_sigusr1_to_a_worker_reopens_its_log(backend, start_proxy, tmp_path):
    """SIGUSR1 sent to worker 1 itself is its own business: it reopens the
    access log (after a rotation by rename, its lines go to the new file)."""
    path = tmp_path / "access.log"
    proxy = start_proxy(backend, workers=2, access_log=str(path))
    pids = started_workers(proxy, 2)
    os.rename(path, tmp_path / "access.log.1")
    os.kill(pids[0], signal.SIGUSR1)
    wait_for_log(proxy, f"worker 1: access_log: reopened {path}", POLL_TIMEOUT)
    assert path.exists(), proxy.stderr()
    assert_logged_times(proxy, "access_log: reopened", 1)
    assert not log_lines(proxy, "cannot reopen"), proxy.stderr()


# -- readiness: systemd's notify protocol -----------------------------------------------


def next_message(sock):
    """The next datagram on `sock` (bounded by its timeout), as text."""
    try:
        return sock.recv(4096).decode()
    except socket.timeout:
        pytest.fail(f"no message on NOTIFY_SOCKET within {POLL_TIMEOUT} s")


@pytest.mark.parametrize("workers", [1, 2], ids=["alone", "master"])
@pytest.mark.parametrize("kind", ["path", "abstract"])
def test_notify_socket_hears_ready_reloading_stopping(make_backend, start_proxy, rsp, tmp_path, monkeypatch,
                                                      workers, kind):
    """rsp started with NOTIFY_SOCKET naming a datagram socket the test
    holds (a path, or "@name" for an abstract one): READY=1 once it
    serves; on SIGHUP "RELOADING=1" with MONOTONIC_USEC (a time on the
    monotonic clock between the signal and the message) then READY=1;
    on SIGTERM STOPPING=1; nothing else (no worker speaks), and rsp
    exits 0."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.settimeout(POLL_TIMEOUT)
    if kind == "path":
        address = name = str(tmp_path / "notify")
    else:
        address = f"\0rsp-fts-notify-{os.getpid()}-{free_port()}"
        name = "@" + address[1:]
    sock.bind(address)
    try:
        monkeypatch.setenv("NOTIFY_SOCKET", name)
        a = make_backend("a")
        proxy = start_proxy(a, workers=workers)
        monkeypatch.delenv("NOTIFY_SOCKET")
        assert next_message(sock) == "READY=1"
        assert_serves(proxy)

        write_config(rsp, proxy, tmp_path, [make_backend("b")], workers=workers)
        before = time.monotonic_ns() // 1000
        sighup(proxy, 2)
        reloading = next_message(sock)
        after = time.monotonic_ns() // 1000
        lines = reloading.split("\n")
        assert lines[0] == "RELOADING=1" and len(lines) == 2 and lines[1].startswith("MONOTONIC_USEC="), reloading
        assert before <= int(lines[1].split("=", 1)[1]) <= after, (before, reloading, after)
        assert next_message(sock) == "READY=1"

        os.kill(proxy.pid, signal.SIGTERM)
        assert next_message(sock) == "STOPPING=1"
        assert proxy.wait_exit(10) == 0, proxy.describe()
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            extra = sock.recv(4096)
            pytest.fail(f"a message after STOPPING=1: {extra!r}")
    finally:
        sock.close()


def test_unit_is_type_notify():
    """The systemd unit waits for rsp's READY=1 (Type=notify), hears the
    main process alone (NotifyAccess=main: the workers say nothing) and
    reloads by SIGHUP to it."""
    with open(UNIT) as f:
        service = service_settings(f.read())
    assert service.get("Type") == ["notify"], service.get("Type")
    assert service.get("NotifyAccess") == ["main"], service.get("NotifyAccess")
    assert service.get("ExecReload") == ["/bin/kill -HUP $MAINPID"], service.get("ExecReload")
