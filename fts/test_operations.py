"""Operations: from stage 10, the command line (-t checks a config, -v
prints the version), reloading the config on SIGHUP (backends switched,
the listening socket kept or moved, X-Forwarded-Port following it, a
broken config refused while the old one serves, requests in flight
finishing on the old config, pooled
backend connections kept, twenty reloads under load without a failed
request), stopping on SIGTERM/SIGINT (the listener closed at once,
responses in flight finished, idle keep-alive connections closed,
shutdown_timeout bounding the wait) and shutdown_timeout's limits; from
stage 11, what -t and the settings' checks say about access_log,
access_log_format and user, and dropping root privileges to `user` (only
when the tests run as root).

A reload is confirmed by rsp's log line "reloaded CONFIG: generation N";
a failed one by a line containing "reload failed". The config file a
reload re-reads is the one start_proxy wrote (proxy.args[0]):
proxy_arguments() rewrites it when called again with the same port.
Tests that stop the proxy themselves wait for its exit with
Proxy.wait_exit and check the status (0).

The access log is tested in test_access_log.py.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from backends import read_head
from checks import LOG_LINE, assert_config_error, assert_serves, log_lines, nobody, served_by
from client import Conn, Response, build_request, connect, get, recv_or_reset
from load import SteadyLoad
from netutil import LOOPBACK, free_port, is_listening, privileged_port, wait_for
from pattern import assert_is_pattern
from proxy import backend_address, is_sanitized, proxy_arguments, run_rsp, tcp_socket_fds, vm_rss

pytestmark = pytest.mark.stage(10)
STAGE_11 = pytest.mark.stage(11)  # access_log, access_log_format, user: stage 11 on

# What `rsp -v` prints, by stage: the minor version is the stage's number.
VERSIONS = {n: f"rsp 0.{n}.0" for n in range(10, 100)}
POLL_TIMEOUT = 5.0   # s: a bound on waiting for something that must happen (never a measurement)
EXIT_BOUND = 4.0     # s: a stop that must not wait (nothing in flight, or shutdown_timeout = 1) is over by then


# -- helpers ---------------------------------------------------------------------

def config_path(proxy):
    """The config file the proxy was started with (and re-reads on SIGHUP)."""
    return proxy.args[0]


def write_config(rsp, proxy, tmp_path, backends, **options):
    """Rewrites the proxy's config file: the same listen port, these
    backends and options (as for start_proxy)."""
    (path,) = proxy_arguments(rsp.stage, proxy.port, [backend_address(b) for b in backends], str(tmp_path),
                              options)
    assert path == config_path(proxy)
    return path


def reloaded_line(proxy, generation):
    return f"reloaded {config_path(proxy)}: generation {generation}"


def sighup(proxy, generation):
    """Sends SIGHUP and waits (bounded) for the log line saying the config
    was reloaded as `generation`; fails at once if the reload failed."""
    failed_before = len(log_lines(proxy, "reload failed"))
    os.kill(proxy.pid, signal.SIGHUP)
    expected = reloaded_line(proxy, generation)
    deadline = time.monotonic() + POLL_TIMEOUT
    while True:
        lines = log_lines(proxy, expected)
        if lines:
            break
        assert len(log_lines(proxy, "reload failed")) == failed_before, \
            f"the reload failed (expected {expected!r})\n--- rsp's stderr ---\n{proxy.stderr()}"
        assert proxy.alive(), f"rsp died on SIGHUP\n{proxy.describe()}"
        assert time.monotonic() < deadline, \
            f"no {expected!r} in the log {POLL_TIMEOUT} s after SIGHUP\n--- rsp's stderr ---\n{proxy.stderr()}"
        time.sleep(0.01)
    assert len(lines) == 1, f"{expected!r} logged {len(lines)} times: {lines}"
    assert LOG_LINE.match(lines[0]), f"log line without a timestamp: {lines[0]!r}"


def sighup_failing(proxy):
    """Sends SIGHUP for a config rsp must refuse; waits (bounded) for the
    "reload failed" line. Returns the stderr lines that came with it (the
    new ones since the signal)."""
    before = len(proxy.stderr().splitlines())
    failed_before = len(log_lines(proxy, "reload failed"))
    reloaded_before = len(log_lines(proxy, "reloaded "))
    os.kill(proxy.pid, signal.SIGHUP)
    deadline = time.monotonic() + POLL_TIMEOUT
    while len(log_lines(proxy, "reload failed")) == failed_before and proxy.alive():
        assert time.monotonic() < deadline, \
            f"no 'reload failed' line {POLL_TIMEOUT} s after SIGHUP\n--- rsp's stderr ---\n{proxy.stderr()}"
        time.sleep(0.02)
    assert proxy.alive(), f"rsp died on a SIGHUP with a broken config\n{proxy.describe()}"
    assert len(log_lines(proxy, "reloaded ")) == reloaded_before, f"a broken config was reloaded\n{proxy.describe()}"
    return proxy.stderr().splitlines()[before:]


def listening_inodes(pid):
    """{port: socket inode} of the sockets process `pid` listens on."""
    return {entry[0]: target for _, target, entry in tcp_socket_fds(pid)
            if entry[2] == "0A"}  # TCP_LISTEN


def listening_inode(proxy):
    inodes = listening_inodes(proxy.pid)
    assert proxy.port in inodes, f"rsp (pid {proxy.pid}) holds no listening socket on port {proxy.port}: {inodes}"
    return inodes[proxy.port]


def served_by_each(proxy, count=4, **options):
    """The X-Backend of `count` requests (each must be a 200 from a backend)."""
    return [served_by(get(proxy.port, "/echo", **options)) for _ in range(count)]


class Reading:
    """A client that sent `data` and reads, in a thread, until its
    connection ends; `total` is how many bytes arrived so far."""

    def __init__(self, port, data, timeout=20.0, rcvbuf=None):
        self.total = 0
        self.reset = False
        self.error = None
        self._chunks = []
        self.done = threading.Event()
        self.sock = connect(port, timeout=timeout, rcvbuf=rcvbuf)
        self.sock.sendall(data)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        try:
            while True:
                chunk = recv_or_reset(self.sock, 65536, self.total)
                if chunk is None:
                    self.reset = True
                    break
                if not chunk:
                    break
                self._chunks.append(chunk)
                self.total += len(chunk)
        except Exception as e:  # reported by response()
            self.error = e
        finally:
            self.sock.close()
            self.done.set()

    def wait_for_bytes(self, n):
        wait_for(lambda: self.total >= n or self.done.is_set(), f"{n} bytes of the response", POLL_TIMEOUT)
        assert self.total >= n, f"the connection ended after {self.total} bytes: {b''.join(self._chunks)[:300]!r}"

    def response(self, timeout):
        """The Response once the connection ended (fails if it did not within `timeout` s)."""
        assert self.done.wait(timeout), f"the connection was still open {timeout} s later ({self.total} bytes)"
        assert self.error is None, f"reading failed: {self.error}"
        return Response(b"".join(self._chunks), self.reset)


def assert_refused(port):
    """Nothing listens on `port` any more: a connect is refused."""
    wait_for(lambda: not is_listening(port), f"port {port} no longer listening", POLL_TIMEOUT)
    with pytest.raises(ConnectionRefusedError):
        connect(port, timeout=POLL_TIMEOUT).close()


# -- the command line --------------------------------------------------------------

def test_version(rsp, tmp_path):
    """rsp -v prints "rsp 0.10.0" on stdout (0.11.0 from stage 11, 0.12.0 from
    stage 12) and exits 0."""
    result = run_rsp(rsp, ["-v"], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == VERSIONS[rsp.stage] + "\n", result.stdout
    assert result.stderr == "", result.stderr


@pytest.mark.parametrize("args", [[], ["-t"], ["-x", "rsp.lua"], ["rsp.lua", "other.lua"],
                                  ["-t", "rsp.lua", "other.lua"]],
                         ids=["no-args", "t-without-file", "unknown-option", "two-files", "t-two-files"])
def test_wrong_usage(rsp, tmp_path, args):
    """A wrong command line exits with status 2 and a usage message on
    stderr, starting nothing."""
    (tmp_path / "rsp.lua").write_text(f'listen = "127.0.0.1:{free_port()}"\nbackends = {{ "127.0.0.1:1" }}\n')
    result = run_rsp(rsp, args, tmp_path)
    assert result.returncode == 2, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert "usage:" in result.stderr, result.stderr
    assert "Started" not in result.stdout, result.stdout


def parsed_options(rsp):
    """The options the stage's rsp.c compares argv[1] with."""
    with open(os.path.join(rsp.directory, "rsp.c")) as f:
        return sorted(set(re.findall(r'strcmp\(argv\[1\], "(-[^"]*)"\)', f.read())))


@pytest.mark.stage(16)
@pytest.mark.parametrize("option", ["-h", "--help"])
def test_help(rsp, tmp_path, option):
    """rsp -h and --help print the usage on stdout, naming every option
    rsp.c parses (-t, -v, --version, -h, --help), and exit 0 (before stage
    16 they were a wrong command line: usage on stderr, status 2)."""
    result = run_rsp(rsp, [option], tmp_path)
    assert result.returncode == 0, f"rsp {option}: exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stderr == "", result.stderr
    assert result.stdout.startswith("usage: rsp CONFIG.lua"), result.stdout
    options = parsed_options(rsp)
    assert {"-t", "-v", "--version", "-h", "--help"} <= set(options), f"rsp.c parses {options}"
    words = set(re.findall(r"-{1,2}[a-z]+", result.stdout))
    missing = [o for o in options if o not in words]
    assert not missing, f"rsp {option} does not mention {missing}:\n{result.stdout}"


@pytest.mark.stage(16)
def test_version_long_option(rsp, tmp_path):
    """rsp --version prints what rsp -v prints ("rsp 0.16.0") on stdout and
    exits 0."""
    result = run_rsp(rsp, ["--version"], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == VERSIONS[rsp.stage] + "\n", result.stdout
    assert result.stderr == "", result.stderr


@pytest.mark.parametrize("with_log", [False, pytest.param(True, marks=STAGE_11)],
                         ids=["settings", "with-access-log"])
def test_check_good_config(rsp, tmp_path, backend, with_log):
    """rsp -t CONFIG with a good config prints "rsp: CONFIG: ok" (the path
    exactly as given, here relative) on stdout and exits 0 without
    listening: its port is held by another socket of the test meanwhile,
    which a real start could not bind. (From stage 11 also with an access
    log in the timed format.)"""
    options = {"shutdown_timeout": 2.5, "keepalive_requests": 100}
    if with_log:
        options.update(access_log=str(tmp_path / "access.log"), access_log_format="timed")
    with socket.create_server((LOOPBACK, 0)) as holder:
        port = holder.getsockname()[1]
        (path,) = proxy_arguments(rsp.stage, port, [backend_address(backend)], str(tmp_path), options)
        name = os.path.basename(path)
        result = run_rsp(rsp, ["-t", name], tmp_path)
        assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
        assert result.stdout == f"rsp: {name}: ok\n", result.stdout
        # the port is still ours alone: rsp did not take it over
        holder.settimeout(0.1)
        with pytest.raises(socket.timeout):
            holder.accept()
    assert backend.total_hits == 0, "rsp -t sent a request to the backend"


def test_check_good_config_absolute_path(rsp, tmp_path):
    """The ok line names the path as given, absolute here."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [(LOOPBACK, 1)], str(tmp_path))
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout


B = (LOOPBACK, 1)  # a backend address nothing has to answer at: these configs never serve

# (id, Lua text appended to a valid config, or a dict of options, setting the error names or None)
CHECK_ERRORS = [
    ("syntax-error", "listen = = 8000\n", None),
    ("runtime-error", 'error("boom")\n', None),
    ("keepalive_requests-negative", {"keepalive_requests": -1}, "keepalive_requests"),
    ("backend-port-0", 'backends = { "nohost:0" }\n', "backends"),
    ("backend-unresolvable", 'backends = { "nosuchhost.invalid:80" }\n', "backends"),
    ("shutdown_timeout-negative", {"shutdown_timeout": -1}, "shutdown_timeout"),
    ("access_log_format-unknown", {"access_log_format": "apache"}, "access_log_format", STAGE_11),
]


def bad_config(rsp, tmp_path, change):
    """A config file with `change` (Lua text appended, or options); its path."""
    options = change if isinstance(change, dict) else {}
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), options)
    if isinstance(change, str):
        with open(path, "a") as f:
            f.write(change)
    return path


@pytest.mark.parametrize("change, setting", [pytest.param(*c[1:3], marks=c[3:], id=c[0]) for c in CHECK_ERRORS])
def test_check_bad_config(rsp, tmp_path, change, setting):
    """rsp -t with a config rsp cannot use (a Lua error, a bad setting, a
    name that does not resolve) exits 1 with one line on stderr naming the
    file (and the setting), the same line a start with that config gives."""
    path = bad_config(rsp, tmp_path, change)
    checked = run_rsp(rsp, ["-t", path], tmp_path)
    line = assert_config_error(checked, path, setting, quoted=False, status=1)
    started = run_rsp(rsp, [path], tmp_path)
    assert started.returncode == 1, f"exit status {started.returncode}, stderr: {started.stderr!r}"
    assert started.stderr.splitlines() == [line], \
        f"rsp -t said {line!r}, a start said {started.stderr!r}"


def test_check_missing_file(rsp, tmp_path):
    """rsp -t with a file that does not exist exits 1 naming it."""
    path = tmp_path / "nosuch.lua"
    assert_config_error(run_rsp(rsp, ["-t", str(path)], tmp_path), path, status=1)


# -- the settings of stages 10 and 11 ----------------------------------------------------

BAD_SETTINGS = [
    ("shutdown_timeout", -1), ("shutdown_timeout", -0.5), ("shutdown_timeout", "10"),
    ("shutdown_timeout", True),
] + [pytest.param(s, v, marks=STAGE_11, id=f"{s}={v!r}") for s, v in [
    ("access_log_format", "apache"), ("access_log_format", 1),
    ("access_log", 5), ("access_log", True),
    ("user", True), ("user", {}),
]]


@pytest.mark.parametrize("setting, value", BAD_SETTINGS,
                         ids=[f"{s[0]}={s[1]!r}" if isinstance(s, tuple) else s.id for s in BAD_SETTINGS])
def test_bad_operations_setting(rsp, tmp_path, setting, value):
    """shutdown_timeout (stage 10 on), access_log, access_log_format and
    user (stage 11 on) of the wrong type or out of range are a config
    error at start: a non-zero exit status, one line naming the file and
    the setting."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), {setting: value})
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, setting, quoted=False, status=None)


def test_shutdown_timeout_nan_refused(rsp, tmp_path):
    """shutdown_timeout = 0/0 (NaN) is not a number >= 0."""
    path = bad_config(rsp, tmp_path, "shutdown_timeout = 0/0\n")
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, "shutdown_timeout", quoted=False, status=None)


@STAGE_11
def test_access_log_that_cannot_be_opened(rsp, tmp_path):
    """An access_log in a directory that does not exist: rsp -t refuses the
    config (exit 1, one line naming the file and the setting), and a start
    fails (a non-zero exit status, stderr naming the setting and the log's
    path; opening the log may be a step of the start rather than of the
    config, so more lines may come before)."""
    log = str(tmp_path / "no-such-dir" / "access.log")
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), {"access_log": log})
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, "access_log", quoted=False, status=1)
    started = run_rsp(rsp, [path], tmp_path)
    assert started.returncode != 0, f"rsp started without its access log: {started.stderr!r}"
    assert any("access_log" in line and log in line for line in started.stderr.splitlines()), started.stderr


@pytest.mark.parametrize("with_log", [False, pytest.param(True, marks=STAGE_11)],
                         ids=["shutdown_timeout", "with-log-formats"])
def test_operations_settings_accepted(backend, start_proxy, tmp_path, with_log):
    """shutdown_timeout takes fractions of a second and 0; from stage 11,
    both log formats are accepted too."""
    for options, log in (({"shutdown_timeout": 0.25}, {"access_log_format": "combined"}),
                         ({"shutdown_timeout": 0}, {"access_log_format": "timed",
                                                    "access_log": str(tmp_path / "a.log")})):
        proxy = start_proxy(backend, **options, **(log if with_log else {}))
        assert_serves(proxy)


# -- SIGHUP: reloading the config ---------------------------------------------------------

def test_reload_switches_backends(make_backend, start_proxy, rsp, tmp_path):
    """Requests go to backend a; the config is rewritten to name backend b
    and rsp gets SIGHUP: it logs "reloaded CONFIG: generation 2" and new
    requests go to b, on new connections and on a keep-alive connection
    opened before the reload; the same process goes on listening on the
    same socket (inode); a second reload back to a is generation 3."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a)
    inode = listening_inode(proxy)
    assert served_by_each(proxy) == ["a"] * 4
    with Conn(proxy.port) as kept:
        assert served_by(kept.get("/echo")) == "a"
        write_config(rsp, proxy, tmp_path, [b])
        sighup(proxy, 2)
        assert served_by_each(proxy) == ["b"] * 4
        assert served_by(kept.get("/echo")) == "b", "a request on a connection opened before the reload"
    assert proxy.alive()
    assert listening_inode(proxy) == inode, "the listening socket was replaced, not kept"
    write_config(rsp, proxy, tmp_path, [a])
    sighup(proxy, 3)
    assert served_by_each(proxy) == ["a"] * 4
    assert listening_inode(proxy) == inode
    assert a.requests == 9 and b.requests == 5


def test_reload_applies_new_settings(make_backend, start_proxy, rsp, tmp_path):
    """A reload applies more than the backends: sites added by the new
    config are served (a name unknown before gets 421, then its backend)."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(sites={"a.test": [a]})
    assert get(proxy.port, "/echo", host="b.test").status == 421
    write_config(rsp, proxy, tmp_path, [], sites={"a.test": [a], "b.test": [b]})
    sighup(proxy, 2)
    assert served_by(get(proxy.port, "/echo", host="b.test")) == "b"
    assert served_by(get(proxy.port, "/echo", host="a.test")) == "a"


# (id, Lua text appended to the new config, or a dict of options, or None
# for a missing file; setting the error line names or None)
RELOAD_ERRORS = [
    ("syntax-error", "backends = = 1\n", None),
    ("runtime-error", 'error("boom")\n', None),
    ("keepalive_requests-negative", {"keepalive_requests": -1}, "keepalive_requests"),
    ("backend-unresolvable", 'backends = { "nosuchhost.invalid:80" }\n', "backends"),
    ("missing-file", None, None),
]


@pytest.mark.parametrize("change, setting", [c[1:] for c in RELOAD_ERRORS], ids=[c[0] for c in RELOAD_ERRORS])
def test_broken_reload_keeps_old_config(make_backend, start_proxy, rsp, tmp_path, change, setting):
    """A SIGHUP with a config rsp cannot use (it names backend b, but is
    broken) logs the config error (the line rsp -t gives for that file,
    naming it, and the setting) and then a line containing "reload
    failed"; the old config goes on serving (backend a), on the same
    socket. Once the file is fixed, a later SIGHUP reloads it as
    generation 2 (the failed attempt did not count)."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a)
    inode = listening_inode(proxy)
    path = write_config(rsp, proxy, tmp_path, [b], **(change if isinstance(change, dict) else {}))
    if isinstance(change, str):
        with open(path, "a") as f:
            f.write(change)
    elif change is None:
        os.rename(path, path + ".moved")
    error = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, setting, quoted=False, status=1)
    new_lines = sighup_failing(proxy)
    failed = min(i for i, line in enumerate(new_lines) if "reload failed" in line)
    message = error[len("rsp: "):]  # the line may come with a timestamp in front
    if "nosuchhost" in str(change):
        message = message.rsplit(": ", 1)[0]  # the resolver's reason may vary from one try to the next
    assert any(message in line for line in new_lines[:failed]), \
        f"the config error {error!r} was not logged before 'reload failed': {new_lines}"
    assert served_by_each(proxy) == ["a"] * 4, "the old config no longer serves"
    assert listening_inode(proxy) == inode
    if change is None:
        os.rename(path + ".moved", path)
    write_config(rsp, proxy, tmp_path, [b])
    sighup(proxy, 2)
    assert served_by_each(proxy) == ["b"] * 4
    assert listening_inode(proxy) == inode


def test_reload_moving_listen(make_backend, start_proxy, rsp, tmp_path):
    """A reload that changes listen: the new port listens (and serves),
    the old one is closed; the same process."""
    a = make_backend("a")
    proxy = start_proxy(a)
    old, new = proxy.port, free_port()
    proxy_arguments(rsp.stage, old, [backend_address(a)], str(tmp_path), {"listen": f"{LOOPBACK}:{new}"})
    sighup(proxy, 2)
    wait_for(lambda: is_listening(new), f"the new port {new} listening", POLL_TIMEOUT)
    assert_refused(old)
    proxy.port = new  # for the teardown's look at its sockets
    assert served_by(get(new, "/echo")) == "a"
    assert set(listening_inodes(proxy.pid)) == {new}


def forwarded_port(r):
    """The X-Forwarded-Port values the test backend's /echo received."""
    assert r.status == 200, r
    return [value for name, value in r.json()["headers"] if name.lower() == "x-forwarded-port"]


def test_forwarded_port_across_reloads(make_backend, start_proxy, rsp, tmp_path):
    """X-Forwarded-Port is the port the client connected to after a reload
    that keeps `listen` (the listener, or its socket, carried over) and
    after one that moves it (a listener on the new port)."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a)
    old, new = proxy.port, free_port()
    write_config(rsp, proxy, tmp_path, [b])
    sighup(proxy, 2)
    r = get(old, "/echo")
    assert served_by(r) == "b" and forwarded_port(r) == [str(old)], \
        f"after a reload keeping port {old}: X-Forwarded-Port {forwarded_port(r)}"
    proxy_arguments(rsp.stage, old, [backend_address(a)], str(tmp_path), {"listen": f"{LOOPBACK}:{new}"})
    sighup(proxy, 3)
    wait_for(lambda: is_listening(new), f"the new port {new} listening", POLL_TIMEOUT)
    proxy.port = new  # for the teardown's look at its sockets
    r = get(new, "/echo")
    assert served_by(r) == "a" and forwarded_port(r) == [str(new)], \
        f"after a reload moving listen from {old} to {new}: X-Forwarded-Port {forwarded_port(r)}"


def test_reload_to_busy_port_fails(make_backend, start_proxy, rsp, tmp_path):
    """A reload whose new listen port is taken (by a socket of the test)
    fails: "reload failed" is logged, the old port still listens on the
    same socket and serves the old config."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a)
    inode = listening_inode(proxy)
    with socket.create_server((LOOPBACK, 0)) as holder:
        busy = holder.getsockname()[1]
        proxy_arguments(rsp.stage, proxy.port, [backend_address(b)], str(tmp_path), {"listen": f"{LOOPBACK}:{busy}"})
        sighup_failing(proxy)
        assert served_by_each(proxy) == ["a"] * 4
        assert listening_inode(proxy) == inode


def test_reload_keeps_pooled_backend_connections(make_keepalive_backend, start_proxy, rsp, tmp_path):
    """An idle pooled connection to a backend the new config still names
    is used after the reload: the backend sees one connection only."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    first = get(proxy.port, "/cl?size=10")
    assert first.status == 200 and first.header("X-Conn") == "1", first.headers
    write_config(rsp, proxy, tmp_path, [ka], keepalive_timeout=30)
    sighup(proxy, 2)
    for _ in range(3):
        r = get(proxy.port, "/cl?size=20")
        assert r.status == 200, r
        assert r.header("X-Conn") == "1", f"a new backend connection after the reload: {r.headers}"
    assert ka.connections == 1, ka.conns


def test_reload_keeps_a_backends_health(make_backend, start_proxy, rsp, tmp_path):
    """A backend that health checks marked down and that the new config
    still names (with the same checks) stays down across a reload: no
    request reaches it, it is not logged up, and when its checks pass
    again it comes back as usual. A backend the new config adds serves at
    once."""
    check = {"path": "/healthz", "interval": 0.2, "timeout": 0.5, "rise": 2, "fall": 1}
    a, b, c = make_backend("a"), make_backend("b"), make_backend("c")
    name = "%s:%d" % backend_address(a)
    a.health_status = 503
    proxy = start_proxy(a, b, health_check=check)
    wait_for(lambda: log_lines(proxy, f"backend {name} is down"), "a marked down by its health check",
             POLL_TIMEOUT)
    write_config(rsp, proxy, tmp_path, [a, b, c], health_check=check)
    sighup(proxy, 2)
    answered = [served_by(get(proxy.port, "/bytes?n=10")) for _ in range(12)]
    assert "a" not in answered, f"a backend marked down got requests after the reload: {answered}"
    assert set(answered) == {"b", "c"}, answered
    assert not log_lines(proxy, f"backend {name} is up"), proxy.stderr()
    a.health_status = 200
    wait_for(lambda: log_lines(proxy, f"backend {name} is up"), "a back up after its checks pass", POLL_TIMEOUT)
    answered = [served_by(get(proxy.port, "/bytes?n=10")) for _ in range(6)]
    assert set(answered) == {"a", "b", "c"}, answered


def test_old_generations_are_freed(backend, start_proxy, rsp, tmp_path):
    """Each generation has its own Lua state; once no request holds an old
    one, it is freed. With a route script that builds a table of some
    megabytes, 60 reloads (each followed by a request) leave rsp's memory
    where it was after the first few: a leaked generation per reload would
    add the table each time. (Memory is not judged under AddressSanitizer,
    whose quarantine keeps freed memory; LeakSanitizer checks at exit.)"""
    route = """
local names = {}
for i = 1, 40000 do names[i] = "entry number " .. i end
function route(req) return nil end
"""
    proxy = start_proxy(backend, route=route)
    assert_serves(proxy)
    for generation in range(2, 6):
        write_config(rsp, proxy, tmp_path, [backend], route=route)
        sighup(proxy, generation)
        assert_serves(proxy)
    settled = vm_rss(proxy.pid)
    for generation in range(6, 66):
        write_config(rsp, proxy, tmp_path, [backend], route=route)
        sighup(proxy, generation)
        assert_serves(proxy, n=100)
    grown = (vm_rss(proxy.pid) - settled) // 1024
    if is_sanitized(proxy.binary):
        pytest.skip(f"memory not judged under AddressSanitizer (grew {grown} KiB)")
    # One table is about 2 MiB; 60 leaked generations would be over 100.
    assert grown < 16 * 1024, f"rsp grew by {grown} KiB over 60 reloads: old generations are not freed"


def test_inflight_response_survives_reloads(make_backend, start_proxy, rsp, tmp_path):
    """A 5 MiB response that backend a sends slowly (40 pieces of 128 KiB,
    one every 50 ms) survives two reloads made after its first MiB (to b,
    then to c) byte-exact, while requests made meanwhile go to b, then c."""
    a, b, c = make_backend("a"), make_backend("b"), make_backend("c")
    proxy = start_proxy(a)
    pieces, piece = 40, 128 * 1024
    size = pieces * piece
    with connect(proxy.port, timeout=20) as sock:
        sock.sendall(build_request(proxy.port, "GET", f"/drip?chunks={pieces}&size={piece}&delay=0.05"))
        data = bytearray()
        while len(data) < 1024 * 1024:
            chunk = sock.recv(65536)
            assert chunk, f"the response ended after {len(data)} bytes"
            data += chunk
        write_config(rsp, proxy, tmp_path, [b])
        sighup(proxy, 2)
        assert served_by_each(proxy, 2) == ["b", "b"]
        write_config(rsp, proxy, tmp_path, [c])
        sighup(proxy, 3)
        assert served_by_each(proxy, 2) == ["c", "c"]
        while True:
            chunk = sock.recv(262144)
            if not chunk:
                break
            data += chunk
    r = Response(bytes(data))
    assert r.status == 200 and r.header("X-Backend") == "a", r
    assert_is_pattern(r.body, size)


def test_twenty_reloads_under_load(make_keepalive_backend, start_proxy, rsp, tmp_path):
    """Four clients (two on keep-alive connections, two opening a
    connection per request) send GETs the whole time while the config is
    reloaded 20 times, alternating between backends {a1, a2} and {b}: not
    one request fails, every response is a complete 200 from one of them,
    both sets served, and after the last reload (back to {a1, a2}) only a1
    and a2 serve. (The teardown then checks that no fd was leaked.)"""
    a1, a2, b = (make_keepalive_backend(name) for name in ("a1", "a2", "b"))
    sets = [[a1, a2], [b]]
    names = {"a1", "a2", "b"}
    proxy = start_proxy(*sets[0])
    with SteadyLoad(proxy.port, names, keepalive=2, fresh=2) as load:
        for i in range(1, 21):
            time.sleep(0.05)
            write_config(rsp, proxy, tmp_path, sets[i % 2])
            sighup(proxy, i + 1)
        time.sleep(0.1)
    load.assert_clean()
    served = load.served
    assert served["b"] > 0 and served["a1"] + served["a2"] > 0, served
    assert sum(served.values()) >= 100, f"too little load to mean anything: {served}"
    assert set(served_by_each(proxy, 6)) <= {"a1", "a2"}


# -- SIGTERM and SIGINT: stopping ----------------------------------------------------------

def test_sigterm_finishes_inflight_response(make_backend, start_proxy):
    """SIGTERM while a slow response (40 KB over 4 s) is in flight: the
    listening socket is closed at once (a new connect is refused), the
    process goes on until the client got the whole response, then exits
    with status 0."""
    backend = make_backend("a")
    proxy = start_proxy(backend)
    n = 40
    client = Reading(proxy.port, build_request(proxy.port, "GET", f"/drip?chunks={n}&size=1000&delay=0.1"))
    client.wait_for_bytes(2000)
    proxy.process.send_signal(signal.SIGTERM)
    assert_refused(proxy.port)
    assert proxy.alive(), "rsp exited with a response in flight"
    assert not client.done.is_set(), f"the response ended after {client.total} bytes"
    r = client.response(POLL_TIMEOUT + n * 0.1)
    assert r.status == 200 and not r.reset, r
    assert_is_pattern(r.body, n * 1000)
    assert proxy.wait_exit(POLL_TIMEOUT) == 0


def test_sigterm_inflight_keepalive_response_says_close(make_keepalive_backend, start_proxy):
    """A keep-alive client whose response is still being prepared at
    SIGTERM gets it whole, with Connection: close, and then the close."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    with Conn(proxy.port) as c:
        r = c.get("/cl?size=10")
        assert r.status == 200 and "close" not in r.connection_tokens(), r.headers
        c.send(c.request_bytes("GET", "/delay?seconds=1&size=500"))
        wait_for(lambda: ka.requests == 2, "the second request at the backend", POLL_TIMEOUT)
        proxy.process.send_signal(signal.SIGTERM)
        r = c.read_response()
        assert r.status == 200 and r.complete, f"{r!r} {r.raw[:300]!r}"
        assert_is_pattern(r.body, 500)
        assert "close" in r.connection_tokens(), f"no Connection: close during the shutdown: {r.headers}"
        assert c.state(POLL_TIMEOUT) == "eof"
    assert proxy.wait_exit(POLL_TIMEOUT) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stop_closes_idle_keepalive_connections(make_keepalive_backend, start_proxy, sig):
    """With only idle keep-alive client connections, SIGTERM or SIGINT
    closes them at once (the client reads EOF) and rsp exits with status
    0, long before the default shutdown_timeout (10 s)."""
    ka = make_keepalive_backend("ka")
    proxy = start_proxy(ka)
    conns = [Conn(proxy.port) for _ in range(3)]
    try:
        for c in conns:
            assert c.get("/cl?size=10").status == 200
        proxy.process.send_signal(sig)
        for c in conns:
            assert c.state(EXIT_BOUND) == "eof", "an idle keep-alive connection was not closed at once"
    finally:
        for c in conns:
            c.close()
    assert proxy.wait_exit(EXIT_BOUND) == 0


def endless(conn, backend):
    """A backend whose response never ends: chunks of 1000 bytes, one
    every 10 ms, until the peer goes (or 30 s)."""
    read_head(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"3e8\r\n" + b"x" * 1000 + b"\r\n"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        conn.sendall(piece)
        time.sleep(0.01)


@pytest.mark.parametrize("timeout", [2, 0])
def test_shutdown_timeout_ends_endless_response(make_raw_backend, start_proxy, timeout):
    """SIGTERM while a response that never ends is in flight: with
    shutdown_timeout = 2 the response goes on flowing for a while (rsp is
    still there half a second later); with 2 or 0, rsp then closes it and exits with status 0 within a few seconds, and
    the client's connection ends."""
    raw = make_raw_backend(endless)
    proxy = start_proxy(raw, shutdown_timeout=timeout)
    client = Reading(proxy.port, build_request(proxy.port, "GET", "/endless"))
    client.wait_for_bytes(5000)
    proxy.process.send_signal(signal.SIGTERM)
    if timeout:
        at_signal = client.total
        time.sleep(0.5)
        assert proxy.alive(), "rsp did not wait for the response in flight"
        assert client.total > at_signal, "the response stopped flowing at SIGTERM"
    assert proxy.wait_exit(EXIT_BOUND + timeout) == 0
    r = client.response(POLL_TIMEOUT)
    assert r.status == 200, r


# -- privileges (stage 11) ----------------------------------------------------------------

def free_privileged_port():
    """A loopback port below 1024 that nothing is bound to, this suite's
    alone (locked: see netutil.privileged_port), or None."""
    return privileged_port()


def proc_ids(pid, field):
    """The numbers of the Uid:, Gid: or Groups: line of /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no {field} line in /proc/{pid}/status")


@STAGE_11
def test_drops_privileges_to_user(backend, start_proxy):
    """Started as root with user = "nobody", rsp binds its port (one below
    1024, which only root may bind), then runs as nobody: real, effective,
    saved and filesystem uid and gid are nobody's, no supplementary group
    is root's; and it still serves."""
    user = nobody()
    port = free_privileged_port()
    if port is None:
        pytest.skip("no free port below 1024 on 127.0.0.1")
    proxy = start_proxy(backend, port=port, user="nobody")
    assert proc_ids(proxy.pid, "Uid") == [user.pw_uid] * 4
    assert proc_ids(proxy.pid, "Gid") == [user.pw_gid] * 4
    assert 0 not in proc_ids(proxy.pid, "Groups"), proc_ids(proxy.pid, "Groups")
    assert_serves(proxy)


@STAGE_11
def test_dropped_user_can_reopen_its_access_log(backend, start_proxy):
    """Started as root with user = "nobody" and an access log that does
    not exist yet: rsp creates the file as root, hands it to nobody before
    dropping root, and so can open it again on SIGUSR1 (what logrotate's
    signal does) and go on logging to it."""
    user = nobody()
    directory = tempfile.mkdtemp(prefix="rsp-log-")
    try:
        os.chmod(directory, 0o755)  # nobody must reach the file, not create it
        path = os.path.join(directory, "access.log")
        proxy = start_proxy(backend, user="nobody", access_log=path)
        assert os.stat(path).st_uid == user.pw_uid, "the log file is not nobody's"
        assert_serves(proxy)
        reopened_before = len(log_lines(proxy, "reopened"))
        os.kill(proxy.pid, signal.SIGUSR1)
        wait_for(lambda: len(log_lines(proxy, "reopened")) > reopened_before or
                 "cannot reopen" in proxy.stderr(), "the log reopened after SIGUSR1", timeout=POLL_TIMEOUT)
        assert "cannot reopen" not in proxy.stderr(), proxy.stderr()
        assert_serves(proxy)
        wait_for(lambda: len(open(path).read().splitlines()) >= 2, "two lines in the log",
                 timeout=POLL_TIMEOUT)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def unit_capabilities():
    """The capabilities the systemd unit (dist/rsp.service.in) leaves rsp:
    its CapabilityBoundingSet line, as setpriv's --bounding-set argument."""
    unit = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dist", "rsp.service.in")
    with open(unit) as f:
        for line in f:
            if line.startswith("CapabilityBoundingSet="):
                caps = line.split("=", 1)[1].split()
                return "-all," + ",".join("+" + c[len("CAP_"):].lower() for c in caps)
    raise AssertionError(f"no CapabilityBoundingSet line in {unit}")


@STAGE_11
@pytest.mark.parametrize("log_exists", [False, True], ids=["new-log", "log-already-the-users"])
def test_starts_with_the_units_capabilities(rsp, backend, tmp_path, log_exists):
    """Started as root with only the capabilities the systemd unit leaves
    it (setpriv --bounding-set), user = "nobody" and an access log, rsp
    starts, drops to nobody, serves and logs, whether it creates the log
    file (and hands it to nobody) or finds it nobody's already."""
    user = nobody()
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    directory = tempfile.mkdtemp(prefix="rsp-unit-")
    try:
        os.chmod(directory, 0o755)
        log = os.path.join(directory, "access.log")
        if log_exists:
            with open(log, "w"):
                pass
            os.chown(log, user.pw_uid, -1)
        port = free_port()
        (config,) = proxy_arguments(rsp.stage, port, [backend_address(backend)], str(tmp_path),
                                    {"user": "nobody", "access_log": log})
        process = subprocess.Popen(["setpriv", "--bounding-set", unit_capabilities(), "--", rsp.binary, config],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda: is_listening(port) or process.poll() is not None, "rsp listening", POLL_TIMEOUT)
            assert process.poll() is None, f"rsp did not start: {process.communicate()[1].decode()}"
            r = get(port, "/bytes?n=10")
            assert r.status == 200, r
            assert proc_ids(process.pid, "Uid") == [user.pw_uid] * 4
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=POLL_TIMEOUT)
        assert process.returncode == 0, err.decode()
        assert os.stat(log).st_uid == user.pw_uid
        with open(log) as f:
            assert '"GET /bytes?n=10 HTTP/1.1" 200 10' in f.read()
        assert b"cannot hand" not in err, err.decode()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@STAGE_11
def test_unknown_user_refused(rsp, tmp_path):
    """As root, a user that does not exist is a config error naming the
    setting."""
    nobody()
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), {"user": "no-such-user-rsp"})
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, "user", quoted=False, status=None)
