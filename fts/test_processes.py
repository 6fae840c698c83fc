"""Processes as an operator sees them (stage 19): with workers, ps tells
the master from the workers as it does nginx's ("rsp: master process
CONFIG", "rsp: worker process N"), while rsp alone keeps its command
line; the process name (/proc/PID/comm, what pkill matches) stays rsp.
`pid_file` holds the master's (or rsp alone's) pid while it runs, is
root's when rsp drops root, goes at a clean exit, and refuses a second
rsp while the first runs (a stale one is replaced).

The command line is read from /proc/PID/cmdline, as ps reads it: the
title, then NUL bytes (the rest of the memory argv had). Worker pids come
from the master's children and its `worker N started (pid P)` lines
(test_workers.started_workers), whose teardown check (every worker gone
after its master) applies here too.
"""

import os
import signal

import pytest

from checks import assert_serves, nobody
from netutil import free_port
from proxy import proxy_arguments, run_rsp
from test_workers import no_worker_left_behind, started_workers  # noqa: F401 (an autouse fixture)

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
