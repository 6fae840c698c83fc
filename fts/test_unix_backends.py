"""Backends on Unix domain sockets (stage 23): "unix:/ABSOLUTE/PATH"
wherever a backend address is allowed. rsp connects there (AF_UNIX,
non-blocking), pools and reuses the connections as it does TCP ones, treats
a failed connect (no such file, refused, not a socket, no permission) as it
treats a refused TCP connect (passive health, another backend, 502), runs
health checks over it, and names the backend everywhere as configured.

The backend is a KeepAliveBackend (backends.py) listening on a socket in a
short temporary directory (sun_path holds at most 107 bytes; pytest's
tmp_path can be longer than that).
"""

import hashlib
import json
import os
import shutil
import socket
import tempfile

import pytest

from backends import KeepAliveBackend
from checks import assert_config_error, assert_logged_once, log_lines, wait_for_log
from client import Conn, request
from conftest import _stopped_at_teardown
from netutil import LOOPBACK, free_port, wait_for, wait_until_listening
from pattern import assert_is_pattern, pattern
from promparse import parse as parse_metrics
from proxy import lua_config, run_rsp, stage5_settings

pytestmark = pytest.mark.stage(23)

POLL_TIMEOUT = 10.0  # s: a bound on waiting for something that must happen
SUN_PATH_MAX = 107   # bytes of a path in sockaddr_un, less its terminating zero


@pytest.fixture
def socket_dir():
    """A short directory for Unix sockets, removed after the test."""
    path = tempfile.mkdtemp(prefix="rsp-unix-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def unix_backend(start_proxy, socket_dir):
    """unix_backend(name) starts a KeepAliveBackend on DIR/NAME.sock; its
    .address is "unix:DIR/NAME.sock". Set up after start_proxy, so stopped
    before the proxy's teardown check: the backend's close of the pooled
    connections lets rsp close them (they are no leak then)."""
    def start(name):
        backend = KeepAliveBackend(name, unix_path=os.path.join(socket_dir, f"{name}.sock"))
        backend.address = f"unix:{backend.unix_path}"
        return backend

    yield from _stopped_at_teardown(start)


@pytest.fixture
def tcp_backend(start_proxy):
    """tcp_backend(name) starts a KeepAliveBackend on 127.0.0.1, stopped
    (as unix_backend's) before the proxy's teardown check."""
    yield from _stopped_at_teardown(KeepAliveBackend)


def assert_served(r, size):
    assert r.status == 200 and r.complete, f"{r!r} {r.raw[:300]!r}"
    assert_is_pattern(r.body, size)


def went_down(address, why):
    return f"backend {address} is down ({why})"


# -- proxying ------------------------------------------------------------------------

def test_requests_proxied_byte_exact(unix_backend, start_proxy):
    """A GET with a Content-Length body, a chunked response and a POST of
    1 MiB go through a Unix socket backend unchanged."""
    u = unix_backend("u")
    proxy = start_proxy(u.address)
    with Conn(proxy.port) as c:
        assert_served(c.request("GET", "/cl?size=300000"), 300000)
        r = c.request("GET", "/chunked?size=200000&chunks=7")
        assert r.status == 200 and r.framing == "chunked", f"{r!r} {r.headers}"
        assert_is_pattern(r.decoded, 200000)
        body = pattern(1 << 20)
        r = c.request("POST", "/echo", headers=[("Content-Length", str(len(body)))], body=body)
        assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
        echoed = json.loads(r.body)
        assert echoed["body_length"] == len(body), echoed["body_length"]
        assert echoed["body_sha256"] == hashlib.sha256(body).hexdigest(), "the POST body changed on the way"
    assert u.requests == 3, u.records


def test_connections_reused(unix_backend, start_proxy):
    """Twenty requests from five client connections one after another
    reach the backend over one Unix socket connection: it is pooled."""
    u = unix_backend("u")
    proxy = start_proxy(u.address)
    for i in range(5):
        with Conn(proxy.port) as c:
            for j in range(4):
                assert_served(c.request("GET", f"/cl?size={1000 + 10 * i + j}"), 1000 + 10 * i + j)
    assert u.requests == 20, u.records
    assert u.connections == 1, f"{u.connections} backend connections for 20 requests one at a time: {u.conns}"


def test_mixed_pool(unix_backend, tcp_backend, start_proxy):
    """A pool of a Unix socket backend and a TCP one: round-robin takes
    turns between the two."""
    u, t = unix_backend("u"), tcp_backend("t")
    proxy = start_proxy(u.address, t)
    with Conn(proxy.port) as c:
        served = [c.request("GET", "/cl?size=100").header("X-Backend") for _ in range(10)]
    assert sorted(served) == ["t"] * 5 + ["u"] * 5, served


def test_response_body_spliced(unix_backend, start_proxy):
    """splice(2) moves a response body from a Unix socket as from a TCP
    one: /metrics counts nearly all of a 4 MiB body as spliced (all but
    what came with the head and what the client's socket took at once)."""
    u = unix_backend("u")
    port = free_port()
    proxy = start_proxy(u.address, status_listen=f"{LOOPBACK}:{port}", splice=True)
    wait_until_listening(port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    size = 4 << 20
    assert_served(request(proxy.port, f"/cl?size={size}"), size)
    spliced = metric_value(port, "rsp_spliced_bytes_total")
    assert size - (512 << 10) <= spliced <= size, f"{spliced} of {size} body bytes spliced"


def test_sites_and_pools(unix_backend, start_proxy):
    """A site's backends and a named pool's take "unix:" addresses too (one
    parser for every backends list)."""
    u, v = unix_backend("u"), unix_backend("v")
    proxy = start_proxy(sites={"u.test": [u.address], "v.test": {"pool": "p"}}, pools={"p": [v.address]})
    for host, name in (("u.test", "u"), ("v.test", "v")):
        with Conn(proxy.port, host=host) as c:
            r = c.request("GET", "/cl?size=10")
            assert r.status == 200 and r.header("X-Backend") == name, f"{host}: {r!r} {r.headers}"


# -- failures ------------------------------------------------------------------------

def test_missing_socket_file(socket_dir, start_proxy):
    """A socket file that does not exist: 502, and the log names the path
    and why (ENOENT)."""
    address = f"unix:{socket_dir}/missing.sock"
    proxy = start_proxy(address)
    r = request(proxy.port, "/")
    assert r.status == 502, f"{r!r} {r.raw[:300]!r}"
    assert_logged_once(proxy, went_down(address, "No such file or directory"))


@pytest.mark.parametrize("kind", ["regular-file", "mode-000"])
def test_unconnectable_path(kind, socket_dir, unix_backend, tcp_backend, start_proxy):
    """A path that is a regular file (ECONNREFUSED), or a listening socket
    rsp may not write to (mode 000: EACCES; only when not root, whom
    permissions do not stop): the backend is down, the TCP one serves."""
    if kind == "regular-file":
        path = os.path.join(socket_dir, "file.sock")
        with open(path, "w") as f:
            f.write("not a socket\n")
        why = "Connection refused"
    else:
        if os.geteuid() == 0:
            pytest.skip("root connects to a socket whatever its mode")
        u = unix_backend("u")
        path = u.unix_path
        os.chmod(path, 0)
        why = "Permission denied"
    t = tcp_backend("t")
    proxy = start_proxy(f"unix:{path}", t)
    with Conn(proxy.port) as c:
        served = [c.request("GET", "/cl?size=100").header("X-Backend") for _ in range(4)]
    assert served == ["t"] * 4, served
    assert_logged_once(proxy, went_down(f"unix:{path}", why))


def test_full_backlog(socket_dir, tcp_backend, start_proxy):
    """A Unix socket whose listen backlog is full (a server that stopped
    accepting): the connect fails at once with EAGAIN, which counts as a
    refused connect: the backend is down, the TCP one serves."""
    path = os.path.join(socket_dir, "full.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(0)
        waiting = []
        try:
            while True:  # fill the backlog until the kernel refuses one more
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setblocking(False)
                waiting.append(c)
                try:
                    c.connect(path)
                except BlockingIOError:
                    break
                assert len(waiting) < 100, "the backlog of listen(0) never filled"
            t = tcp_backend("t")
            proxy = start_proxy(f"unix:{path}", t)
            with Conn(proxy.port) as c:
                served = [c.request("GET", "/cl?size=100").header("X-Backend") for _ in range(4)]
            assert served == ["t"] * 4, served
            assert_logged_once(proxy, went_down(f"unix:{path}", "Resource temporarily unavailable"))
        finally:
            for c in waiting:
                c.close()


def test_backend_stops_listening(unix_backend, tcp_backend, start_proxy):
    """A Unix socket backend that stops listening (its file stays): passive
    health marks it down at the first refused connect, the TCP backend
    serves every request, and status.json shows it down."""
    u, t = unix_backend("u"), tcp_backend("t")
    port = free_port()
    proxy = start_proxy(u.address, t, status_listen=f"{LOOPBACK}:{port}", down_time=60)
    wait_until_listening(port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    assert sorted(request(proxy.port, "/cl?size=10").header("X-Backend") for _ in range(2)) == ["t", "u"]
    u.stop()
    served = [request(proxy.port, "/cl?size=10") for _ in range(6)]
    assert [r.header("X-Backend") for r in served] == ["t"] * 6, [r.status for r in served]
    assert_logged_once(proxy, went_down(u.address, "Connection refused"))
    entry = backend_entry(status_json(port), u.address)
    assert entry["passive_health"] == "down" and not entry["up"], entry


def test_health_check_over_unix(unix_backend, tcp_backend, start_proxy):
    """Active health checks reach a Unix socket backend (GET of the path,
    Host: localhost) and notice when it stops listening."""
    u, t = unix_backend("u"), tcp_backend("t")
    proxy = start_proxy(u.address, t, health_check={"path": "/healthz", "interval": 0.2, "timeout": 1, "fall": 1})
    wait_for(lambda: u.requests_for("/healthz"), "a health check over the Unix socket", POLL_TIMEOUT)
    check = u.requests_for("/healthz")[0]
    assert check.method == "GET" and check.header("Host") == "localhost", check.head
    u.stop()
    wait_for_log(proxy, f"backend {u.address} is down: health check failed", POLL_TIMEOUT)
    with Conn(proxy.port) as c:
        served = [c.request("GET", "/cl?size=10").header("X-Backend") for _ in range(4)]
    assert served == ["t"] * 4, served
    assert not log_lines(proxy, f"backend {t.host}:{t.port} is down"), proxy.stderr()


# -- names ---------------------------------------------------------------------------

def status_get(port, path):
    r = request(port, path)
    assert r.status == 200, f"{path}: {r!r} {r.raw[:300]!r}"
    return r.body.decode("utf-8")


def status_json(port):
    return json.loads(status_get(port, "/status.json"))


def metric_value(port, name):
    """The one sample of family `name` in /metrics."""
    samples = parse_metrics(status_get(port, "/metrics"))[name]["samples"]
    assert len(samples) == 1, samples
    return next(iter(samples.values()))


def backend_entry(document, name):
    entries = [b for pool in document["pools"] for b in pool["backends"] if b["name"] == name]
    assert len(entries) == 1, f"no single backend named {name!r} in {document['pools']}"
    return entries[0]


def test_names_as_configured(unix_backend, start_proxy, tmp_path):
    """status.json, the /metrics label and the access log name a Unix
    socket backend "unix:/PATH", as configured."""
    u = unix_backend("u")
    port = free_port()
    log_path = tmp_path / "access.log"
    proxy = start_proxy(u.address, status_listen=f"{LOOPBACK}:{port}", access_log=str(log_path),
                        access_log_format="json")
    wait_until_listening(port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    assert_served(request(proxy.port, "/cl?size=10"), 10)
    entry = backend_entry(status_json(port), u.address)
    assert entry["up"] and entry["requests"] == 1, entry
    families = parse_metrics(status_get(port, "/metrics"))
    samples = families["rsp_backend_up"]["samples"]
    up = [v for labels, v in samples.items() if ("backend", u.address) in labels]
    assert up == [1.0], samples
    wait_for(lambda: log_path.exists() and log_path.read_text().strip(), "the access log line", POLL_TIMEOUT)
    line = json.loads(log_path.read_text().splitlines()[0])
    assert line["backend"] == u.address, line


# -- config errors -------------------------------------------------------------------

@pytest.mark.parametrize("text, why", [
    ("unix:run/app.sock", "the path is not absolute"),
    ("unix:", "the path is empty"),
    ("unix:/" + "x" * SUN_PATH_MAX, f"the path is longer than {SUN_PATH_MAX} bytes"),
])
def test_config_errors(text, why, rsp, tmp_path):
    """A "unix:" backend whose path is relative, empty or too long for
    sun_path is refused by rsp -t with one exact line."""
    path = tmp_path / "rsp.lua"
    path.write_text(lua_config(stage5_settings(free_port(), [text])))
    line = assert_config_error(run_rsp(rsp, ["-t", str(path)], tmp_path), path, "backends")
    assert line == (f"rsp: {path}: setting 'backends', entry 1: \"{text[:100]}\" must be HOST:PORT or "
                    f"unix:/ABSOLUTE/PATH: {why}"), line


def test_config_longest_path_accepted(rsp, tmp_path):
    """A path of exactly 107 bytes fits sun_path: rsp -t accepts it (the
    socket need not exist when the config is read)."""
    path = tmp_path / "rsp.lua"
    path.write_text(lua_config(stage5_settings(free_port(), ["unix:/" + "x" * (SUN_PATH_MAX - 1)])))
    result = run_rsp(rsp, ["-t", str(path)], tmp_path)
    assert result.returncode == 0, result.stderr


def test_config_zero_byte(rsp, tmp_path):
    """A zero byte inside a "unix:" path is refused."""
    path = tmp_path / "rsp.lua"
    path.write_text(f'listen = "{LOOPBACK}:{free_port()}"\nbackends = {{ "unix:/tmp/a\\0b.sock" }}\n')
    assert_config_error(run_rsp(rsp, ["-t", str(path)], tmp_path), path, "backends",
                        words=("must not contain a zero byte",))
