"""Processes as an operator sees them (stage 19): with workers, ps tells
the master from the workers as it does nginx's ("rsp: master process
CONFIG", "rsp: worker process N"), while rsp alone keeps its command
line; the process name (/proc/PID/comm, what pkill matches) stays rsp.

The command line is read from /proc/PID/cmdline, as ps reads it: the
title, then NUL bytes (the rest of the memory argv had). Worker pids come
from the master's children and its `worker N started (pid P)` lines
(test_workers.started_workers), whose teardown check (every worker gone
after its master) applies here too.
"""

import os

import pytest

from checks import assert_serves
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
