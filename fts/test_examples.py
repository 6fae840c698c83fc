"""The example configs in examples/ are the first thing an operator copies:
each must load in the current code and serve traffic. `make run`'s demo
config is checked end to end against a backend of ours."""

import os
import re
import signal

import pytest

from client import get
from netutil import free_port
from proxy import LATER_OPTIONS, fd_targets, tcp_sockets

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def example_on_test_ports(name, tmp_path, backend):
    """The example's text with its listen setting moved to a free port and
    every backend pointed at `backend`, written into tmp_path."""
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    port = free_port()
    # Lists of several backends become one entry (a list may not name the
    # same backend twice), then every backend is ours.
    text = re.sub(r'(?:"127\.0\.0\.1:\d+",?(?:\s*--[^\n]*)?\s*){2,}', '"127.0.0.1:1" ', text)
    text = re.sub(r'"127\.0\.0\.1:\d+"', f'"127.0.0.1:{backend.port}"', text)
    text, n = re.subn(r'^listen = .*$', f'listen = "127.0.0.1:{port}"', text, flags=re.M)
    assert n == 1, f"{name} must set listen exactly once"
    # A status listener on a free port too: suites run side by side.
    text = re.sub(r'^status_listen = .*$', f'status_listen = "127.0.0.1:{free_port()}"', text, flags=re.M)
    path = tmp_path / name
    path.write_text(text)
    return path, port


# The first stage of each setting an example may set beyond stage 07's
# (checked latest first): proxy.LATER_OPTIONS from stage 10 on.
SETTING_STAGES = tuple((stage, "|".join(names)) for stage, names in sorted(LATER_OPTIONS.items(), reverse=True)) + (
    (9, r"keepalive_timeout|keepalive_requests|backend_keepalive|backend_idle_timeout"),
    (8, r"\w+_timeout|health_check"),
)


def first_stage(name):
    """The stage an example needs: the first that knows every setting it
    sets (SETTING_STAGES), 07 if it defines a route function, else 06."""
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    for stage, names in SETTING_STAGES:
        if re.search(rf"^({names}) = ", text, flags=re.M):
            return stage
    return 7 if re.search(r"^function route\(", text, flags=re.M) else 6


@pytest.mark.stage(6)
@pytest.mark.parametrize("name", sorted(n for n in os.listdir(EXAMPLES) if n.endswith(".lua")))
def test_example_config_serves(name, tmp_path, backend, start_proxy, rsp):
    """Each example config starts rsp and proxies a request to its backend."""
    if rsp.stage < first_stage(name):
        pytest.skip(f"{name} needs stage {first_stage(name):02d}")
    path, port = example_on_test_ports(name, tmp_path, backend)
    proxy = start_proxy(args=[str(path)], port=port)
    r = get(proxy.port, "/echo")
    assert r.status == 200, r.raw[:300]
    assert r.header("X-Backend") == backend.name


@pytest.mark.stage(7)
def test_routing_example_decides_as_its_comments_say(tmp_path, backend, start_proxy):
    """examples/routing.lua: example.com is redirected to www with path and
    query, /admin is refused to a client other than 127.0.0.1 and served to
    127.0.0.1, /static/ and the rest reach the backends."""
    path, port = example_on_test_ports("routing.lua", tmp_path, backend)
    proxy = start_proxy(args=[str(path)], port=port)
    hits = backend.total_hits

    r = get(proxy.port, "/a/../blog?x=1", host="Example.COM:8080", source="127.0.0.1")
    assert r.status == 301, r.raw[:300]
    assert r.header("Location") == "https://www.example.com/blog?x=1"
    r = get(proxy.port, "/admin/users", host="www.example.com", source="127.0.0.2")
    assert r.status == 403, r.raw[:300]
    assert backend.total_hits == hits, "rsp's own answers must not reach a backend"

    for source, target in (("127.0.0.1", "/admin/echo"), ("127.0.0.2", "/static/echo"),
                           ("127.0.0.2", "/echo")):
        r = get(proxy.port, target, host="www.example.com", source=source)  # any 127.x.y.z is ours
        # The backend answers 404 for paths other than /echo: its answer
        # all the same, as X-Backend shows.
        assert r.status == (200 if target == "/echo" else 404), (source, target, r.raw[:300])
        assert r.header("X-Backend") == backend.name


def listeners_on(ports):
    """The pids of the processes holding a socket listening on any of
    `ports` (127.0.0.1)."""
    inodes = {f"socket:[{inode}]" for inode, (local, _, state, _, _) in tcp_sockets(os.getpid()).items()
              if local in ports and state == "0A"}
    pids = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and inodes & set(fd_targets(int(name)).values()):
                pids.append(int(name))
        except OSError:  # another user's process: not ours to stop
            pass
    return pids


@pytest.mark.stage(16)
def test_make_run_stops_once_on_ctrl_c(rsp, fixed_port, tmp_path):
    """`make run`'s script (examples/run-demo) on the terminal it was started
    from: a Ctrl-C stops rsp gracefully with one signal, letting a request
    under way finish, and never logs "again: stopping now" (rsp in the
    terminal's process group got the Ctrl-C's SIGINT and the script's
    SIGTERM both); the backend and rsp are gone afterwards."""
    import pty
    import select
    import socket
    import subprocess
    import time

    fixed_port(8000)
    fixed_port(8001)
    script = os.path.join(os.path.dirname(EXAMPLES), "examples", "run-demo")
    # A terminal of its own, as a developer's: Ctrl-C is the byte \x03 on it,
    # which the kernel turns into SIGINT for its foreground process group.
    controller, terminal = pty.openpty()

    def on_its_terminal():
        # Ctrl-C as a developer's shell gives it: SIGINT at its default.
        # run_integration_tests starts its suites in the background (`&`),
        # where bash sets SIGINT ignored; every child inherits that, and a
        # shell that starts with a signal ignored cannot trap it. (Full runs
        # saw run-demo not answer a Ctrl-C it had echoed; a lone run never.)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        __import__("fcntl").ioctl(0, __import__("termios").TIOCSCTTY, 0)
    demo = subprocess.Popen([script], stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True,
                            env=dict(os.environ, RSP=rsp.binary), close_fds=True,
                            preexec_fn=on_its_terminal)
    os.close(terminal)
    output = b""

    def read_until(done, seconds):
        nonlocal output
        end = time.monotonic() + seconds
        while not done() and time.monotonic() < end:
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(controller, 4096)
                except OSError:  # EIO: every process of the terminal is gone
                    return
                if not chunk:
                    return
                output += chunk

    try:
        read_until(lambda: b"Ctrl-C to stop" in output or demo.poll() is not None, 30)
        assert b"Ctrl-C to stop" in output, f"run-demo did not start:\n{output.decode(errors='replace')}"
        # A request under way: rsp must wait for it, so a second signal would show.
        with socket.create_connection(("127.0.0.1", 8000), timeout=10) as client:
            client.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n")
            read_until(lambda: False, 0.3)
            os.write(controller, b"\x03")
            read_until(lambda: b"stopping" in output, 10)
            client.sendall(b"\r\n")
            client.settimeout(10)
            answer = client.recv(4096)
        read_until(lambda: b"run-demo: stopped" in output, 15)
        try:
            demo.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run-demo still running 15 s after Ctrl-C; the terminal said:\n"
                        f"{output.decode(errors='replace')}")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        os.close(controller)
        # rsp and the backend run in sessions of their own: whatever still
        # listens on the demo's ports after a failure must not outlive the
        # test (the next test of these ports would fail because of it).
        for pid in listeners_on((8000, 8001)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = output.decode(errors="replace")
    assert "run-demo: stopped" in text, text
    assert "stopping;" in text and "again" not in text, text
    assert answer.startswith(b"HTTP/1.1 200"), f"the request under way got {answer[:100]!r}:\n{text}"
    for port in (8000, 8001):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}:\n{text}"
