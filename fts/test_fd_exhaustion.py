"""Out of file descriptors (stage 06 on).

rsp runs with RLIMIT_NOFILE = NOFILE (start_proxy(nofile=...)) and is
filled up with idle clients: up to stage 07 nothing times them out, so
each holds its fd for as long as it likes, until rsp can accept no more.
Then a new client must get rsp's 503 Service Unavailable rather than a
silent close; rsp must not spin on the listening socket it cannot serve
(its CPU time, from /proc/PID/stat, stays far below the wall time: this
detects a busy loop, it measures no speed) nor write a log line per
client turned away (at most one a second, and one more of slack). Once
the idle clients go, requests are served again.

Pauses only pace the new clients; waiting is a bounded poll."""

import functools
import math
import os
import select
import time

import pytest

import netutil
from client import connect, exchange, read_response
from proxy import count_fds
from test_http import http_request

NOFILE = 48            # rsp's RLIMIT_NOFILE: room for some 40 clients
HELD_TIMEOUT = 5.0     # s; a bound on waiting for rsp to accept a client (or turn it away)
SATURATED_FOR = 2.0    # s of new clients while rsp is full
PACE = 0.05            # s between two new clients
CPU_SHARE = 0.5        # rsp may use at most this share of one core meanwhile (a spin uses ~1)
LOG_LINE = "out of file descriptors"
POLL_TIMEOUT = 10.0    # s; a bound on waiting for service to come back

wait_for = functools.partial(netutil.wait_for, timeout=POLL_TIMEOUT)


def cpu_ticks(pid):
    """utime + stime of process pid, in clock ticks (/proc/PID/stat fields
    14 and 15; the command name in parentheses may contain blanks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # fields[0] is field 3, the state


def readable(sock):
    return bool(select.select([sock], [], [], 0)[0])


def fill_up(proxy):
    """Opens idle connections (they send nothing) one at a time, each
    seen held by rsp (its fd count grows), until one is turned away (it
    gets an answer or an end of file, or rsp does not take it within
    HELD_TIMEOUT). Returns (the idle connections, time.monotonic() when
    the one turned away connected)."""
    wait_for(lambda: count_fds(proxy.pid) <= proxy.baseline_fds,
             f"the proxy back to its {proxy.baseline_fds} fds of startup")
    idle = []
    try:
        for _ in range(NOFILE + 10):
            started = time.monotonic()
            sock = connect(proxy.port)
            while count_fds(proxy.pid) <= proxy.baseline_fds + len(idle):
                if readable(sock) or time.monotonic() > started + HELD_TIMEOUT:
                    sock.close()
                    assert len(idle) >= 10, \
                        f"rsp turned a client away while holding only {len(idle)} idle ones"
                    return idle, started
                time.sleep(0.01)
            idle.append(sock)
    except BaseException:
        for sock in idle:
            sock.close()
        raise
    for sock in idle:
        sock.close()
    pytest.fail(f"rsp held {len(idle)} idle clients with RLIMIT_NOFILE {NOFILE}: the limit is not in force")


def assert_503(r, what="a new client"):
    """r is rsp's own 503 Service Unavailable, ending the connection."""
    assert r.raw.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), \
        f"{what} of a proxy out of fds got {r.raw[:300]!r} (reset: {r.reset}) instead of rsp's 503"
    assert r.header("X-Backend") is None, r.headers


def serves_again(proxy):
    r = exchange(proxy.port, http_request(target="/echo"))
    return r.status == 200 and r.header("X-Backend") == "a"


@pytest.mark.stage(6)
def test_out_of_fds_new_client_gets_503_then_service_resumes(backend, start_proxy):
    """Full of idle clients, rsp answers a new client's request with its
    own 503 (and ends the connection) instead of closing without a word;
    it stays full while the idle clients stay; once they have gone,
    requests get their 200 again."""
    proxy = start_proxy(backend, nofile=NOFILE)
    assert serves_again(proxy)
    idle, _ = fill_up(proxy)
    try:
        for i in range(3):
            assert_503(exchange(proxy.port, http_request(target="/echo")), f"new client {i + 1}")
    finally:
        for sock in idle:
            sock.close()
    wait_for(lambda: serves_again(proxy), "requests served again once the idle clients closed")
    assert backend.total_hits >= 2


@pytest.mark.stage(6)
def test_out_of_fds_no_spin_and_one_log_line_a_second(backend, start_proxy):
    """Full of idle clients for SATURATED_FOR seconds, with a new client
    every PACE seconds: each new client gets rsp's 503; rsp's CPU time
    grows by far less than the wall time (CPU_SHARE of one core: a busy
    loop on the listening socket would use all of it); rsp's log has at
    most one "out of file descriptors" line per second of saturation,
    and one more, not one per client."""
    proxy = start_proxy(backend, nofile=NOFILE)
    since = len(proxy.stderr())
    idle, saturated_at = fill_up(proxy)
    clients = []
    try:
        ticks, wall = cpu_ticks(proxy.pid), time.monotonic()
        while time.monotonic() < wall + SATURATED_FOR:
            sock = connect(proxy.port)
            clients.append(sock)
            try:
                sock.sendall(http_request(target="/echo"))
            except OSError:  # turned away before the request was out: the read below tells
                pass
            time.sleep(PACE)
        ticks, wall = cpu_ticks(proxy.pid) - ticks, time.monotonic() - wall
        answers = []
        for sock in clients:
            answers.append(read_response(sock))
        saturation = time.monotonic() - saturated_at
    finally:
        for sock in clients + idle:
            sock.close()
    cpu = ticks / os.sysconf("SC_CLK_TCK")
    assert cpu < CPU_SHARE * wall, \
        f"rsp used {cpu:.2f} s of CPU in {wall:.2f} s out of fds: it spins instead of waiting"
    lines = [line for line in proxy.stderr()[since:].splitlines() if LOG_LINE in line]
    allowed = math.ceil(saturation) + 1
    assert len(lines) <= allowed, \
        (f"{len(lines)} '{LOG_LINE}' lines in {saturation:.1f} s of saturation ({len(clients)} clients "
         f"turned away), at most {allowed} expected:\n" + "\n".join(lines[:10]))
    for i, r in enumerate(answers):
        assert_503(r, f"paced client {i + 1} of {len(answers)}")
    wait_for(lambda: serves_again(proxy), "requests served again once the idle clients closed")


@pytest.mark.stage(6)
def test_out_of_fds_for_the_backend_socket_gets_503_not_502(backend, start_proxy):
    """rsp holds a client but has no descriptor left for the backend
    socket: the client gets rsp's 503 (the shortage is rsp's own, as for
    a client turned away at accept), not the 502 that says the backend
    failed; the backend is not marked down for it, and once descriptors
    free up the next request is served by it."""
    proxy = start_proxy(backend, nofile=NOFILE)
    idle, _ = fill_up(proxy)
    try:
        # One descriptor free: enough to accept a client, none for the
        # socket to the backend.
        held = len(idle) - 1
        idle.pop().close()
        wait_for(lambda: count_fds(proxy.pid) <= proxy.baseline_fds + held,
                 "rsp to close the idle client that left")
        sock = connect(proxy.port)
        try:
            sock.sendall(http_request(target="/echo"))
            r = read_response(sock)
        finally:
            sock.close()
        assert_503(r, "a client accepted while no descriptor was left for the backend socket")
        assert backend.total_hits == 0, "the request reached the backend after all"
    finally:
        for sock in idle:
            sock.close()
    wait_for(lambda: serves_again(proxy), "requests served again once the idle clients closed")
    log = proxy.stderr()
    assert "is down" not in log, f"the backend was marked down for rsp's own shortage:\n{log}"
    assert "Too many open files" in log, f"rsp's log does not say why it answered 503:\n{log}"
