"""pytest setup for the rsp functional tests.

    /usr/bin/python3 -m pytest fts                # src/rsp (the newest stage)
    /usr/bin/python3 -m pytest fts --stage 02     # stages/02-*/rsp
    /usr/bin/python3 -m pytest fts --stage 04 --binary /tmp/asan/rsp
                                                  # another build, judged as stage 04

Markers:
    @pytest.mark.stage(first, last=None)  the test applies to stages first..last
    @pytest.mark.bug(first, fixed, reason)  a known bug of stages first..fixed-1:
        there the test is a strict expected failure (so a pass is reported
        as an error: the bug is not where the tutorial says it is).
    @pytest.mark.unreliable(first, fixed, reason)  on stages first..fixed-1 a
        known bug makes this test's outcome a matter of luck, so it is
        skipped there (another test shows that bug deterministically).

The harness builds nothing: build the stage (make -C stages/NN-name, or
make -C src) before running the suite.
"""

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass

import pytest

from backends import HTTPBackend, KeepAliveBackend, Nginx, RawBackend
from netutil import fixed_port_lock, free_port
from pattern import pattern
from proxy import Proxy, backend_address, proxy_arguments

DEFAULT_BACKEND_KEEPALIVE = 32  # stage 09's default for backend_keepalive
POOL_CAP = 1024  # stage 18: at most this many idle connections per backend (upstream.c)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES_DIR = os.path.join(REPO, "stages")


@dataclass(frozen=True)
class ProxyUnderTest:
    stage: int      # the stage number whose behaviour to expect
    directory: str  # stages/NN-name or src
    binary: str


def pytest_addoption(parser):
    parser.addoption(
        "--stage", default="src", metavar="NN",
        help="test stages/NN-*/rsp (e.g. 01 or 3) instead of src/rsp; "
             "src behaves like the highest stage under stages/")
    parser.addoption(
        "--binary", default=None, metavar="PATH",
        help="test this rsp binary instead (e.g. a sanitizer build), expecting "
             "the behaviour of the stage chosen with --stage")


def _stage_dirs():
    """{stage number: directory} of stages/NN-name."""
    found = {}
    if os.path.isdir(STAGES_DIR):
        for name in sorted(os.listdir(STAGES_DIR)):
            m = re.match(r"(\d+)-", name)
            if m and os.path.isdir(os.path.join(STAGES_DIR, name)):
                found.setdefault(int(m.group(1)), []).append(os.path.join(STAGES_DIR, name))
    return found


def _resolve(option):
    stages = _stage_dirs()
    if option == "src":
        if not stages:
            raise pytest.UsageError(f"no stages/NN-name directory under {REPO}: cannot tell which stage src/ is")
        directory = os.path.join(REPO, "src")
        return ProxyUnderTest(max(stages), directory, os.path.join(directory, "rsp"))
    if not option.isdigit():
        raise pytest.UsageError(f"--stage takes a stage number like 01 or 3, or src; got {option!r}")
    number = int(option)
    if number not in stages:
        have = ", ".join(f"{n:02d}" for n in sorted(stages)) or "none"
        raise pytest.UsageError(f"no stages/{number:02d}-* directory (stages present: {have})")
    if len(stages[number]) > 1:
        raise pytest.UsageError(f"several directories for stage {number:02d}: {stages[number]}")
    directory = stages[number][0]
    return ProxyUnderTest(number, directory, os.path.join(directory, "rsp"))


def pytest_configure(config):
    rsp = _resolve(config.getoption("--stage"))
    binary = config.getoption("--binary")
    if binary is not None:
        rsp = ProxyUnderTest(rsp.stage, rsp.directory, os.path.abspath(binary))
    config.rsp = rsp


def pytest_report_header(config):
    rsp = config.rsp
    return f"rsp under test: {rsp.binary} (stage {rsp.stage:02d})"


def pytest_sessionstart(session):
    config = session.config
    if config.option.collectonly:
        return
    binary = config.rsp.binary
    if not os.access(binary, os.X_OK):
        where = os.path.relpath(config.rsp.directory, REPO)
        hint = "" if config.getoption("--binary") else f": build it first (make -C {where})"
        pytest.exit(f"{binary} does not exist or is not executable{hint}",
                    returncode=pytest.ExitCode.USAGE_ERROR)


def _marker_args(marker, names):
    """The marker's arguments by name, positional or keyword."""
    values = dict(zip(names, marker.args))
    values.update(marker.kwargs)
    return values


def pytest_collection_modifyitems(config, items):
    stage = config.rsp.stage
    for item in items:
        for marker in item.iter_markers("stage"):
            args = _marker_args(marker, ("first", "last"))
            first, last = args["first"], args.get("last")
            if stage < first or (last is not None and stage > last):
                span = f"stages {first:02d}-{last:02d}" if last is not None else f"stages {first:02d} and later"
                item.add_marker(pytest.mark.skip(reason=f"applies to {span}; this is stage {stage:02d}"))
        for marker in item.iter_markers("bug"):
            args = _marker_args(marker, ("first", "fixed", "reason"))
            if args["first"] <= stage < args["fixed"]:
                item.add_marker(pytest.mark.xfail(
                    strict=True,
                    reason=f"known bug of stages {args['first']:02d}-{args['fixed'] - 1:02d}, "
                           f"fixed in stage {args['fixed']:02d}: {args['reason']}"))
        for marker in item.iter_markers("unreliable"):
            args = _marker_args(marker, ("first", "fixed", "reason"))
            if args["first"] <= stage < args["fixed"]:
                item.add_marker(pytest.mark.skip(
                    reason=f"outcome is luck on stages {args['first']:02d}-{args['fixed'] - 1:02d} "
                           f"(fixed in stage {args['fixed']:02d}): {args['reason']}"))


# -- the proxy -------------------------------------------------------------

@pytest.fixture(scope="session")
def rsp(request):
    """Which rsp is under test: .stage, .directory, .binary."""
    return request.config.rsp


@pytest.fixture(scope="session")
def stage(rsp):
    return rsp.stage


@pytest.fixture
def start_proxy(rsp, tmp_path):
    """start_proxy(backend, ...) starts the proxy under test in front of
    the backends (objects with .host and .port, or (host, port) pairs),
    configured the way its stage expects, on a free port or on port=N;
    from stage 05 on, keyword options set more of the config (listen,
    balance, down_time; see proxy_arguments). start_proxy(args=[...],
    port=N) runs it with exactly these arguments and waits for port N.
    nofile=N (either way) starts it with RLIMIT_NOFILE N: it can then hold
    at most N file descriptors.

    At teardown every proxy started is checked (running, no crash on
    stderr, no fds leaked; from stage 09, idle pooled backend connections,
    up to backend_keepalive per backend, are not leaks) and stopped."""
    started = []

    def start(*backends, args=None, port=None, nofile=None, **options):
        if args is None:
            if port is None:
                port = free_port()
            args = proxy_arguments(rsp.stage, port, [backend_address(b) for b in backends], str(tmp_path),
                                   options)
        elif port is None or options:
            raise ValueError("start_proxy(args=...) needs the port the proxy will listen on, and no options")
        # From stage 09 rsp keeps idle backend connections open (up to
        # backend_keepalive per backend, default 32) for the next request:
        # the teardown check accepts those (see Proxy.settled).
        pooled = options.get("backend_keepalive", DEFAULT_BACKEND_KEEPALIVE) if rsp.stage >= 9 else 0
        if not isinstance(pooled, int) or isinstance(pooled, bool):
            pooled = DEFAULT_BACKEND_KEEPALIVE  # a config rsp refuses: it will not start anyway
        # From stage 18 as many as were in use at once lately are kept too,
        # up to a cap (1024, or one per 4 descriptors rsp may open).
        if rsp.stage >= 18 and pooled > 0:
            pooled = max(pooled, min(POOL_CAP, (nofile or POOL_CAP * 4) // 4))
        proxy = Proxy(rsp.binary, args, port, str(tmp_path), nofile=nofile, pooled=pooled)
        started.append(proxy)
        return proxy

    yield start
    problems = []
    for proxy in started:
        problems += proxy.check_and_stop()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def fixed_port():
    """fixed_port(PORT) takes the lock every suite on this machine shares
    for a port the test must use as it is (443: see
    netutil.fixed_port_lock; it waits, bounded, while another suite's test
    holds it) and keeps it until this test's teardown is over. Request it
    before start_proxy: fixtures are torn down in reverse order, so the
    lock then outlasts the proxy listening there."""
    with contextlib.ExitStack() as held:
        yield lambda port: held.enter_context(fixed_port_lock(port))


# -- backends ----------------------------------------------------------------

def _stopped_at_teardown(start):
    """The body of a fixture that yields start (a function starting a
    backend) and stops every backend it started at teardown."""
    started = []

    def make(*args, **kwargs):
        backend = start(*args, **kwargs)
        started.append(backend)
        return backend

    yield make
    for backend in started:
        backend.stop()


@pytest.fixture
def make_backend():
    """make_backend(name, port=0) starts an HTTPBackend (see backends.py)."""
    yield from _stopped_at_teardown(lambda name="backend", port=0: HTTPBackend(name, port))


@pytest.fixture
def make_raw_backend():
    """make_raw_backend(handle) starts a RawBackend running handle(conn, backend)
    for each connection."""
    yield from _stopped_at_teardown(RawBackend)


@pytest.fixture
def make_keepalive_backend():
    """make_keepalive_backend(name="keepalive", **options) starts a
    KeepAliveBackend (an HTTP/1.1 backend keeping connections open; see
    backends.py for its options)."""
    yield from _stopped_at_teardown(KeepAliveBackend)


@pytest.fixture
def backend(make_backend):
    """One HTTP backend, named "a"."""
    return make_backend("a")


@pytest.fixture
def proxy(backend, start_proxy):
    """The proxy under test in front of `backend`."""
    return start_proxy(backend)


# -- nginx -------------------------------------------------------------------

@pytest.fixture(scope="module")
def static_site(tmp_path_factory):
    """A directory with index.html and a 3 MiB binary file: {name: content}."""
    root = tmp_path_factory.mktemp("site")
    files = {
        "index.html": b"<!DOCTYPE html>\n<html><head><title>rsp test site</title></head>\n"
                      b"<body><h1>Hello through rsp</h1></body></html>\n",
        "blob.bin": pattern(3 * 1024 * 1024 + 123, offset=17),
    }
    for name, content in files.items():
        (root / name).write_bytes(content)
    os.chmod(root, 0o755)
    return root, files


@pytest.fixture(scope="module")
def nginx(static_site, tmp_path_factory):
    """nginx serving static_site on a free loopback port."""
    binary = Nginx.find_binary()
    if binary is None:
        pytest.skip("nginx is not installed (./setup-env.sh installs it)")
    root, _ = static_site
    server = Nginx(binary, str(root), str(tmp_path_factory.mktemp("nginx")))
    yield server
    server.stop()


@pytest.fixture
def shared_dir():
    """A directory every user may traverse (pytest's tmp_path is root's
    alone), removed at teardown: for what rsp reads or writes once it has
    dropped root for user = "nobody"."""
    directory = tempfile.mkdtemp(prefix="rsp-shared-")
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
