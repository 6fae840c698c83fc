"""Checks that several test files share: rsp's own answers, its log lines,
its file descriptors, and whether it still serves.

Every wait here is a bounded poll (a guard against hanging), never a
measurement."""

import os
import pwd
import re
import resource

import pytest

from client import get
import netutil
from pattern import assert_is_pattern

# -- rsp's own answers -----------------------------------------------------------


def assert_rsp_page(r, status, reason):
    """r is an answer rsp wrote itself with its small HTML page: the status
    line, text/html, a body of the announced length naming the status,
    Connection: close, and a FIN rather than a reset. (Up to stage 08 rsp
    closes after every answer; from stage 09 after a request it could not
    read to its end, or one that said Connection: close, as the requests
    of these tests do.)"""
    line = f"HTTP/1.1 {status} {reason}\r\n".encode()
    assert r.raw.startswith(line), f"expected {line!r}, got {r.raw[:300]!r}"
    assert r.header("Content-Type") == "text/html; charset=utf-8", r.headers
    assert r.header("Connection") == "close", r.headers
    assert r.header("X-Backend") is None, r.headers
    assert r.header("Content-Length") is not None, r.headers
    assert int(r.header("Content-Length")) == len(r.body) > 0, f"{r.headers}, body of {len(r.body)} bytes"
    assert f"{status}".encode() in r.body and reason.encode() in r.body, r.body
    assert not r.reset, "the connection ended with a reset instead of a close"


def assert_config_error(result, path, setting=None, quoted=True, words=(), status=1):
    """result (of proxy.run_rsp) is rsp refusing the config file `path`:
    exit status `status` (None: any but 0), exactly one line on stderr,
    starting with "rsp: " and naming the file, the setting (in quotes
    unless quoted=False; not checked if None) and each of `words`, and
    nothing on stdout. Returns that line."""
    if status is None:
        assert result.returncode != 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    else:
        assert result.returncode == status, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {result.stderr!r}"
    line = lines[0]
    assert line.startswith("rsp: "), line
    assert str(path) in line, line
    if setting is not None:
        assert (f"'{setting}'" if quoted else setting) in line, line
    for word in words:
        assert word in line, line
    assert result.stdout == "", f"nothing belongs on stdout: {result.stdout!r}"
    return line


def assert_serves(proxy, n=5000, **options):
    """The proxy answers a normal request in full (a GET of /bytes?n=N
    from the HTTP test backend; options go to client.get, e.g. host=)."""
    r = get(proxy.port, f"/bytes?n={n}", **options)
    assert r.status == 200, f"a normal request failed: {r!r} {r.raw[:200]!r}"
    assert_is_pattern(r.body, n)


def served_by(r):
    """Which test backend answered (its X-Backend header); fails on anything but a 200."""
    assert r.status == 200, f"expected a 200 from a backend, got {r!r}: {r.raw[:300]!r}"
    return r.header("X-Backend")


# -- the log ---------------------------------------------------------------------

# A log line: "YYYY-MM-DD HH:MM:SS rsp: MESSAGE".
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d rsp: ")


def log_lines(proxy, text):
    """The proxy's stderr lines that contain `text`."""
    return [line for line in proxy.stderr().splitlines() if text in line]


def assert_logged_times(proxy, text, times):
    """`text` appears in exactly `times` lines of the log, each timestamped.
    Returns those lines."""
    lines = log_lines(proxy, text)
    assert len(lines) == times, (f"expected {text!r} in {times} log line(s), found {len(lines)}\n"
                                 f"--- rsp's stderr ---\n{proxy.stderr()}")
    for line in lines:
        assert LOG_LINE.match(line), f"log line without a timestamp: {line!r}"
    return lines


def assert_logged_once(proxy, text):
    """`text` appears in exactly one timestamped line of the log; returns it."""
    return assert_logged_times(proxy, text, 1)[0]


def wait_for_log(proxy, text, timeout):
    """Waits (bounded) until some line of the proxy's log contains `text`."""
    netutil.wait_for(lambda: log_lines(proxy, text), f"{text!r} in rsp's log", timeout)


def backend_name(host, port):
    """How the proxy names a backend in its log: as configured."""
    return f"{host}:{port}"


def went_down(host, port):
    """The start of the line passive health logs when a connect fails."""
    return f"backend {backend_name(host, port)} is down ("


# -- file descriptors ------------------------------------------------------------

def wait_idle(proxy, timeout=30.0):
    """Waits (bounded) until the proxy holds no more fds than at startup
    (from stage 09 not counting up to backend_keepalive idle pooled
    connections to each backend: see Proxy.settled): after thousands of
    connections, closing them all may take the proxy and its backend
    longer than the 5 s the teardown check allows."""
    what = f"the proxy back to its {proxy.baseline_fds} fds of startup"
    if proxy.pooled:
        what += f" and at most {proxy.pooled} idle pooled connections per backend"
    netutil.wait_for(proxy.settled, what, timeout)


def skip_without_fds(needed):
    """Skips the test unless this process may open `needed` fds (soft
    RLIMIT_NOFILE; see proxy.raised_fd_limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        pytest.skip(f"RLIMIT_NOFILE is {soft} (hard limit {hard}), below the {needed} fds this test needs")


def nobody():
    """The passwd entry of user nobody, for tests of `user` (rsp dropping
    root); skips the test unless it runs as root on a system that has it."""
    if os.geteuid() != 0:
        pytest.skip("dropping privileges needs the tests to run as root")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("there is no user nobody")


def proc_uid(pid):
    """The effective uid of process `pid`."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[2])
    raise AssertionError(f"no Uid line in /proc/{pid}/status")
