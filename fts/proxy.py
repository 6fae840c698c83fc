"""Starting the proxy under test, and checking it at teardown.

Everything the suite knows about how each stage is started and configured
is in proxy_arguments(): a stage with a new command line or config format
changes that function only.
"""

import contextlib
import os
import resource
import signal
import subprocess
import time

from netutil import LOOPBACK, tcp_table, wait_until_listening

STARTED_MESSAGE = "Started. Listening on port {port}."
READY_TIMEOUT = 10.0
FD_SETTLE_TIMEOUT = 5.0
STOP_TIMEOUT = 5.0

CRASH_SIGNS = (
    "AddressSanitizer",
    "LeakSanitizer",
    "runtime error:",  # UndefinedBehaviorSanitizer
    "Segmentation fault",
    "core dumped",
    "double free",
    "stack smashing",
)


def backend_address(backend):
    """(host, port) of a backend object (anything with .host and .port) or
    pair; a str ("unix:/PATH", stage 23 on) is passed through."""
    if isinstance(backend, (tuple, str)):
        return backend
    return backend.host, backend.port


def lua_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lua_config(settings, changes=None):
    """A Lua config file setting each global in `settings` (a dict of
    name -> Lua source text of the value), with `changes` made first: a
    name -> Lua text sets that global (in its place, or added at the end),
    a name -> None leaves it out."""
    settings = dict(settings)
    for name, value in (changes or {}).items():
        if value is None:
            del settings[name]
        else:
            settings[name] = value
    return "".join(f"{name} = {value}\n" for name, value in settings.items())


def stage3_settings(listen_port, backend):
    """The stage 03 config globals, as Lua source text."""
    host, port = backend
    return {
        "listenPort": str(listen_port),
        "backendAddress": lua_string(host),
        "backendPort": str(port),
    }


def lua_value(value):
    """Lua source text for a Python value: a str, int, float or bool, a
    list or tuple of values (a Lua sequence), or a dict of them (a Lua
    table with keys in brackets: { ["a.example.com"] = ... })."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"[{lua_value(k)}] = {lua_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return lua_string(value)
    if isinstance(value, (list, tuple)):
        return "{ " + ", ".join(lua_value(v) for v in value) + " }"
    raise TypeError(f"no Lua text for {value!r}")


def host_port(host, port):
    """"HOST:PORT", with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# The stage 05 settings a test may give (as Python values) besides the
# backends: listen (default "127.0.0.1:PORT"), balance, down_time.
STAGE5_OPTIONS = ("listen", "balance", "down_time")


def stage5_settings(listen_port, backends, options=None):
    """The stage 05 config globals (listen, backends, and any of
    STAGE5_OPTIONS given in `options`), as Lua source text."""
    settings = {
        "listen": lua_string(f"{LOOPBACK}:{listen_port}"),
        "backends": lua_value([b if isinstance(b, str) else host_port(*b) for b in backends]),
    }
    for name, value in (options or {}).items():
        if name not in STAGE5_OPTIONS:
            raise ValueError(f"unknown stage 05 setting {name!r} (known: {', '.join(STAGE5_OPTIONS)})")
        settings[name] = lua_value(value)
    return settings


# Stage 06 adds: sites (a dict of site name -> list of backends, or ->
# {"backends": [...], "balance": "..."}), max_request_line, max_request_head,
# allow_underscores_in_headers (a bool).
STAGE6_OPTIONS = ("sites", "max_request_line", "max_request_head", "allow_underscores_in_headers")


def backend_text(backend):
    """"HOST:PORT" for a backend object or (host, port) pair; a str is
    taken as already written (e.g. a malformed one rsp must refuse)."""
    return backend if isinstance(backend, str) else host_port(*backend_address(backend))


def pool_value(pool):
    """One site or pool as a Python value for lua_value(): a list of
    backends (objects with .host and .port, or pairs) becomes
    {"backends": ["HOST:PORT", ...]}; in a dict, the list under "backends"
    is converted the same way and every other key (balance, or from stage
    07 a site's "pool") is kept as it is. Anything else (a str, a number),
    and a dict without "backends", is passed through, so that a test can
    write a config rsp must refuse."""
    if isinstance(pool, (list, tuple)):
        pool = {"backends": pool}
    if not isinstance(pool, dict):
        return pool
    pool = dict(pool)
    if isinstance(pool.get("backends"), (list, tuple)):
        pool["backends"] = [backend_text(b) for b in pool["backends"]]
    return pool


def sites_value(sites):
    """The `sites` setting as a Python value for lua_value(): each site's
    backends (objects with .host and .port, or pairs) become "HOST:PORT";
    a site may also be {"pool": "NAME"} (stage 07), passed through."""
    return {name: pool_value(site) for name, site in sites.items()}


def pools_value(pools):
    """The `pools` setting (stage 07) as a Python value for lua_value():
    a dict of pool name -> list of backends, or -> {"backends": [...],
    "balance": "..."}, each backend becoming "HOST:PORT". Anything that is
    not a dict (e.g. 5, for a config rsp must refuse) is passed through."""
    if not isinstance(pools, dict):
        return pools
    return {name: pool_value(pool) for name, pool in pools.items()}


def stage6_settings(listen_port, backends, options=None):
    """The stage 06 config globals, as Lua source text: those of stage 05
    (without `backends` if there are none: then only the sites are served)
    and any of STAGE6_OPTIONS given in `options`."""
    options = dict(options or {})
    extra = {name: options.pop(name) for name in STAGE6_OPTIONS if name in options}
    settings = stage5_settings(listen_port, backends, options)
    if not backends:
        del settings["backends"]
    if "sites" in extra:
        extra["sites"] = sites_value(extra["sites"])
    settings.update((name, lua_value(value)) for name, value in extra.items())
    return settings


# Stage 07 adds: pools (a dict of pool name -> list of backends, or ->
# {"backends": [...], "balance": "..."}), sites whose value is {"pool":
# "NAME"}, route_time_limit (seconds), allow_encoded_slashes (a bool), and
# route: Lua source text (e.g. 'function route(req) return "app" end')
# written verbatim into the config file after the settings.
STAGE7_OPTIONS = ("pools", "route", "route_time_limit", "allow_encoded_slashes")


def names_a_pool(sites):
    """True if some site in a `sites` option is {"pool": ...} (stage 07)."""
    return isinstance(sites, dict) and any(isinstance(site, dict) and "pool" in site for site in sites.values())


def stage7_settings(listen_port, backends, options=None):
    """The stage 07 config globals, as Lua source text: those of stage 06
    (without `backends` if there are none: then the sites or route serve
    every request), plus pools, route_time_limit and allow_encoded_slashes
    from `options`. The `route` option is not a setting: see
    stage7_config()."""
    options = dict(options or {})
    options.pop("route", None)
    pools = options.pop("pools", None)
    limit = options.pop("route_time_limit", None)
    encoded_slashes = options.pop("allow_encoded_slashes", None)
    settings = stage6_settings(listen_port, backends, options)
    if pools is not None:
        settings["pools"] = lua_value(pools_value(pools))
    if limit is not None:
        settings["route_time_limit"] = lua_value(limit)
    if encoded_slashes is not None:
        settings["allow_encoded_slashes"] = lua_value(encoded_slashes)
    return settings


def stage7_config(listen_port, backends, options=None, settings=stage7_settings):
    """The text of a stage 07 config file: the settings of
    stage7_settings() (or of `settings`, a function like it: a later
    stage's), then the `route` option's Lua source, if any."""
    text = lua_config(settings(listen_port, backends, options))
    route = (options or {}).get("route")
    if route is not None:
        if not isinstance(route, str):
            raise TypeError(f"the route option is Lua source text (a str), got {route!r}")
        text += route if route.endswith("\n") else route + "\n"
    return text


# Stage 08 adds the timeouts, in seconds (connect_timeout, header_timeout,
# body_timeout, response_timeout, idle_timeout), and health_check: a dict
# of the active check's fields (path, interval, timeout, rise, fall), or
# False. A pool or a site may have its own: {"backends": [...],
# "health_check": {...} or False} (pool_value passes the key through).
STAGE8_OPTIONS = ("connect_timeout", "header_timeout", "body_timeout", "response_timeout", "idle_timeout",
                  "health_check")


def _settings_adding(names, earlier, listen_port, backends, options):
    """The config globals of `earlier` (a stageN_settings function) plus
    those settings among `names` given in `options`, as Lua source text."""
    options = dict(options or {})
    extra = {name: options.pop(name) for name in names if name in options}
    settings = earlier(listen_port, backends, options)
    settings.update((name, lua_value(value)) for name, value in extra.items())
    return settings


def stage8_settings(listen_port, backends, options=None):
    """The stage 08 config globals, as Lua source text: those of stage 07
    plus any of STAGE8_OPTIONS given in `options`."""
    return _settings_adding(STAGE8_OPTIONS, stage7_settings, listen_port, backends, options)


# Stage 09 adds keep-alive and pooling: keepalive_timeout (seconds, 0:
# one response per client connection), keepalive_requests (per client
# connection), backend_keepalive (idle connections kept per backend, 0:
# none) and backend_idle_timeout (seconds).
STAGE9_OPTIONS = ("keepalive_timeout", "keepalive_requests", "backend_keepalive", "backend_idle_timeout")


def stage9_settings(listen_port, backends, options=None):
    """The stage 09 config globals, as Lua source text: those of stage 08
    plus any of STAGE9_OPTIONS given in `options`."""
    return _settings_adding(STAGE9_OPTIONS, stage8_settings, listen_port, backends, options)


# From stage 10 on, each stage only adds settings to the one before; what
# each adds (the options proxy_arguments accepts from that stage on):
#   10 reload: shutdown_timeout (seconds a SIGTERM waits for requests in
#      flight);
#   11 logs-service: access_log (a file path; off by default),
#      access_log_format ("combined" or "timed") and user (the user rsp
#      drops to after binding, when started as root);
#   12 status: status_listen ("HOST:PORT" or a port; the status page,
#      status.json and /metrics on a listener of their own) and
#      status_public (allow a non-loopback status_listen);
#   13 workers: workers (a number or "auto") and reuseport (one listening
#      socket per worker);
#   14 tls: tls (a dict: listen, a port or "ADDRESS:PORT" of its own;
#      certificates, a list of {"cert": PATH, "key": PATH}, the first the
#      default; from stage 15 also redirect_http, a bool, and hsts,
#      seconds). A value that is not a dict (e.g. 5, for a config rsp must
#      refuse) is passed through; so is a dict with any other key (e.g. a
#      misspelled one);
#   15 https: acme_webroot (a directory whose .well-known/acme-challenge/
#      files the plain listener serves, where certbot --webroot writes them);
#   16 fast-path: splice (a bool, default true: response bodies move from
#      backend to client through a pipe, never through rsp's memory).
#      RSP_FTS_SPLICE=off in the environment (run_integration_tests sets it
#      for the sanitizer pass) writes `splice = false` into every config
#      that does not set splice itself: the whole suite then runs over the
#      copy path too.
#   21 files-compression: root (a directory the default site serves files
#      from; a pool or a site may have "root" instead of "backends"),
#      compress (a bool or {"types": [...], "min_length": N}), headers
#      ({name: value or False}) and error_pages ({status: path, "backends":
#      bool}); a pool or site may have each of these as a key too.
#   22 limits: limit_req ({"rate": R, "burst": B}; a pool or site may have
#      it too) and limit_conn (open connections per client address).
LATER_OPTIONS = {
    10: ("shutdown_timeout",),
    11: ("access_log", "access_log_format", "user"),
    12: ("status_listen", "status_public"),
    13: ("workers", "reuseport"),
    14: ("tls",),
    15: ("acme_webroot",),
    16: ("splice",),
    17: ("request_buffering", "request_buffer_size", "max_body_size", "body_min_rate", "temp_dir",
         "response_buffering", "response_buffer_size", "max_temp_file_size"),
    19: ("pid_file", "ticket_key_lifetime"),
    20: ("http2_max_streams",),
    21: ("root", "compress", "headers", "error_pages"),
    22: ("limit_req", "limit_conn", "allow", "deny", "basic_auth", "trusted_proxies"),
    23: ("hash_key",),
}


def later_settings(stage, listen_port, backends, options=None):
    """The config globals of stage `stage` (10 or later), as Lua source
    text: those of stage 09 plus any option of LATER_OPTIONS up to that
    stage given in `options` (and splice = false from stage 16 when
    RSP_FTS_SPLICE=off asks for it)."""
    options = dict(options or {})
    if stage >= 16 and os.environ.get("RSP_FTS_SPLICE") == "off" and "splice" not in options:
        options["splice"] = False
    names = [name for n, added in LATER_OPTIONS.items() if n <= stage for name in added]
    return _settings_adding(names, stage9_settings, listen_port, backends, options)


def proxy_arguments(stage, listen_port, backends, workdir, options=None):
    """The command-line arguments that make stage `stage` listen on
    listen_port and forward to `backends` (a list of (host, port));
    config files go into workdir. `options` (stage 05 on) sets more of the
    config, as Python values: listen (then it must name listen_port),
    balance, down_time; from stage 06 also sites, max_request_line,
    max_request_head and allow_underscores_in_headers (see STAGE6_OPTIONS),
    and `backends` may be empty when there are sites; from stage 07 also
    pools, route_time_limit, allow_encoded_slashes, route (Lua source text)
    and sites naming a pool (see STAGE7_OPTIONS), and
    `backends` may be empty when there is a route (or when the test wants
    a config rsp must refuse: nothing here checks that one is valid); from
    stage 08 also the timeouts and health_check (see STAGE8_OPTIONS); from
    stage 09 also the keep-alive settings (see STAGE9_OPTIONS); from
    stages 10 and later also what each adds (see LATER_OPTIONS). The file is workdir/rsp-LISTEN_PORT.lua: called
    again with the same port, this rewrites it (for a reload)."""
    options = dict(options or {})
    for first, added in sorted(LATER_OPTIONS.items(), reverse=True):
        if stage < first and set(options) & set(added):
            raise ValueError(f"stage {stage:02d} has no setting "
                             f"{', '.join(sorted(set(options) & set(added)))} (stage {first:02d} on)")
    if stage <= 8 and set(options) & set(STAGE9_OPTIONS):
        raise ValueError(f"stage {stage:02d} has no setting "
                         f"{', '.join(sorted(set(options) & set(STAGE9_OPTIONS)))} (stage 09 on)")
    if stage <= 7 and set(options) & set(STAGE8_OPTIONS):
        raise ValueError(f"stage {stage:02d} has no setting "
                         f"{', '.join(sorted(set(options) & set(STAGE8_OPTIONS)))} (stage 08 on)")
    if stage <= 6:
        newer = sorted(set(options) & set(STAGE7_OPTIONS))
        if names_a_pool(options.get("sites")):
            newer.append("sites naming a pool")
        if newer:
            raise ValueError(f"stage {stage:02d} has no setting {', '.join(newer)} (stage 07 on)")
    if stage <= 5 and set(options) & set(STAGE6_OPTIONS):
        raise ValueError(f"stage {stage:02d} has no setting "
                         f"{', '.join(sorted(set(options) & set(STAGE6_OPTIONS)))} (stage 06 on)")
    if stage <= 4 and len(backends) != 1:
        raise ValueError(f"stage {stage:02d} supports exactly one backend, got {len(backends)}")
    if stage <= 4 and options:
        raise ValueError(f"stage {stage:02d} has no setting {', '.join(options)} (stage 05 on)")
    if stage <= 2:  # rsp LISTEN_PORT BACKEND_HOST BACKEND_PORT
        host, port = backends[0]
        return [str(listen_port), host, str(port)]
    if stage <= 4:  # rsp CONFIG.lua, with listenPort, backendAddress, backendPort
        text = lua_config(stage3_settings(listen_port, backends[0]))
    elif stage <= 5:  # rsp CONFIG.lua, with listen, a list of backends, balance, down_time
        text = lua_config(stage5_settings(listen_port, backends, options))
    elif stage <= 6:  # the same, plus sites and the request-head limits
        text = lua_config(stage6_settings(listen_port, backends, options))
    elif stage <= 7:  # the same, plus pools, route_time_limit and a route function
        text = stage7_config(listen_port, backends, options)
    elif stage <= 8:  # the same, plus the timeouts and health checks
        text = stage7_config(listen_port, backends, options, settings=stage8_settings)
    elif stage <= 9:  # the same, plus keep-alive and backend pooling
        text = stage7_config(listen_port, backends, options, settings=stage9_settings)
    else:  # the same, plus what stages 10 and later add (LATER_OPTIONS)
        text = stage7_config(listen_port, backends, options,
                             settings=lambda *a: later_settings(stage, *a))
    path = os.path.join(workdir, f"rsp-{listen_port}.lua")
    with open(path, "w") as f:
        f.write(text)
    return [path]


_sanitized = {}


def is_sanitized(binary):
    """True if `binary` was built with AddressSanitizer (make asan). Its
    allocator keeps freed memory in quarantine (up to 256 MiB), so its RSS
    says nothing about leaks; LeakSanitizer checks those at exit instead."""
    if binary not in _sanitized:
        with open(binary, "rb") as f:
            _sanitized[binary] = b"AddressSanitizer" in f.read()
    return _sanitized[binary]


RUN_TIMEOUT = 10.0  # a proxy that wrongly starts would run for ever


def stop_process(process, timeout=None):
    """SIGTERM to a subprocess.Popen still running, then SIGKILL if it has
    not exited within timeout seconds (STOP_TIMEOUT by default)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_rsp(rsp, args, cwd):
    """Runs the rsp under test (rsp.binary) with `args` in directory cwd,
    expecting it to exit on its own (a config it refuses, a usage error);
    returns the CompletedProcess, text mode. Fails the test if it keeps
    running for RUN_TIMEOUT seconds."""
    import pytest  # only the tests need it, not every user of this module
    try:
        return subprocess.run([rsp.binary, *args], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, cwd=cwd, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rsp {' '.join(args)} kept running instead of exiting with an error")


def vm_rss(pid):
    """The resident set size of process `pid`, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS line in /proc/{pid}/status")


def count_fds(pid, pipes=True):
    """How many fds process `pid` has open. pipes=False leaves pipes out:
    from stage 13 rsp keeps empty pipes for splice while any client is
    connected (all are closed when the last one goes), so a count of its
    connections' sockets must not include them."""
    names = os.listdir(f"/proc/{pid}/fd")
    if pipes:
        return len(names)
    count = 0
    for name in names:
        try:
            if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("pipe:"):
                count += 1
        except FileNotFoundError:
            pass  # closed while we looked
    return count


def tcp_sockets(pid):
    """{socket inode: (local port, remote address:port as in /proc, state,
    tx_queue, rx_queue)} for the TCP sockets of pid's network namespace
    (/proc/PID/net/tcp and tcp6; state "01" is ESTABLISHED). But those in
    TIME_WAIT, which no process holds: netutil.tcp_table reads them through
    sock_diag, in a fraction of the time; /proc only where it cannot."""
    try:
        return tcp_table()
    except OSError:
        pass
    sockets = {}
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                lines = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, queues, inode = fields[1], fields[2], fields[3], fields[4], fields[9]
            tx, rx = (int(q, 16) for q in queues.split(":"))
            sockets[inode] = (int(local.rsplit(":", 1)[1], 16), remote, state, tx, rx)
    return sockets


def tcp_socket_fds(pid):
    """(fd, "socket:[INODE]", tcp_sockets entry) for each TCP socket that
    process `pid` holds."""
    sockets = tcp_sockets(pid)
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        entry = sockets.get(target[len("socket:["):-1]) if target.startswith("socket:[") else None
        if entry is not None:
            yield int(fd), target, entry


def pooled_fds(pid, listen_port):
    """The fds of process `pid` that look like idle pooled backend
    connections (stage 09 on), by remote address: TCP sockets that are
    ESTABLISHED (the backend has not closed them), were not accepted on
    listen_port nor on any other port the process listens on (the status
    listener, the TLS listener: rsp connected them), and have nothing
    queued either way."""
    return pooled_groups(fd_targets(pid), tcp_sockets(pid), listen_port)


def fd_targets(pid):
    """{fd: what /proc/PID/fd/FD links to} for process `pid` ({} once it
    is gone)."""
    targets = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):
        return targets
    for fd in names:
        try:
            targets[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return targets


def stable_fds(pid, look):
    """({fd: target} of the fds `pid` holds both before and after calling
    look(), look's answer). A socket table read in between then agrees
    with the fds judged: a connection opened or closed meanwhile (a
    health check's lives a fraction of a second) is in neither."""
    before = fd_targets(pid)
    seen = look()
    after = fd_targets(pid)
    return {fd: target for fd, target in before.items() if after.get(fd) == target}, seen


def pooled_groups(targets, table, listen_port):
    """pooled_fds' answer from fds and their link targets ({fd: target})
    and a socket table (tcp_sockets)."""
    sockets = []
    for fd, target in targets.items():
        entry = table.get(target[len("socket:["):-1]) if target.startswith("socket:[") else None
        if entry is not None:
            sockets.append((fd, entry))
    listening = {listen_port} | {local_port for _, (local_port, _, state, _, _) in sockets if state == "0A"}
    pooled = {}
    for fd, (local_port, remote, state, tx, rx) in sockets:
        if state == "01" and local_port not in listening and tx == 0 and rx == 0:
            pooled.setdefault(remote, []).append(fd)
    return pooled


def list_fds(pid):
    entries = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            entries.append(f"{fd} -> {os.readlink(f'/proc/{pid}/fd/{fd}')}")
        except OSError:
            pass
    return entries


def limit_fds(nofile):
    """A Popen preexec_fn that sets the child's RLIMIT_NOFILE (soft and
    hard) to nofile, or None when nofile is None (the child inherits ours)."""
    if nofile is None:
        return None

    def set_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    return set_limit


@contextlib.contextmanager
def raised_fd_limit(wanted):
    """Raises this process's soft RLIMIT_NOFILE to `wanted` (or to the hard
    limit, if lower) for the duration of the with block, then puts it back.
    Processes started meanwhile (the proxy, nginx) inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        yield
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Proxy:
    """One running rsp process listening on 127.0.0.1:port; with nofile=N
    it may hold at most N file descriptors (RLIMIT_NOFILE, set in the child
    before rsp starts: not a config setting). pooled=N (stage 09 on: its
    backend_keepalive) lets the teardown check accept up to N idle pooled
    connections to each backend (see pooled_fds) beyond the fds of startup."""

    def __init__(self, binary, args, port, workdir, nofile=None, pooled=0):
        self.binary = binary
        self.pooled = pooled
        self.stopped_by_test = False  # see wait_exit()
        self.args = args
        self.port = port
        self.host = LOOPBACK
        self.stdout_path = os.path.join(workdir, f"rsp-{port}.stdout")
        self.stderr_path = os.path.join(workdir, f"rsp-{port}.stderr")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen([binary, *args], stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=err, cwd=workdir,
                                            preexec_fn=limit_fds(nofile))
        self.pid = self.process.pid
        try:
            self._wait_ready()
        except Exception:
            self.stop()
            raise
        self.baseline_fds = count_fds(self.pid)

    def _wait_ready(self):
        """Ready means: listening on the port, and the Started line printed
        (on stdout up to stage 18, in the error log from stage 19)."""
        try:
            wait_until_listening(self.port, self.process, READY_TIMEOUT, what="rsp")
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n{self.describe()}") from None
        message = STARTED_MESSAGE.format(port=self.port)
        deadline = time.monotonic() + READY_TIMEOUT
        # stdout up to stage 18; from stage 19 a timestamped log line on stderr
        while message not in self.stdout() and message not in self.stderr():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"rsp listens but never printed {message!r}\n{self.describe()}")
            time.sleep(0.02)

    def stdout(self):
        with open(self.stdout_path, errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.process.poll() is None

    def describe(self):
        return (f"command: {self.binary} {' '.join(self.args)}\n"
                f"--- stdout ---\n{self.stdout()}--- stderr ---\n{self.stderr()}")

    def _fd_problem(self):
        """None once the process has no more fds than right after startup
        (waiting up to FD_SETTLE_TIMEOUT for closes to happen), else a message."""
        deadline = time.monotonic() + FD_SETTLE_TIMEOUT
        while not self.settled():
            if time.monotonic() > deadline:
                fds = list_fds(self.pid)
                pooled = ""
                if self.pooled:
                    pooled = (f" (at most {self.pooled} idle pooled backend connections per backend "
                              f"would be fine; these look pooled: {pooled_fds(self.pid, self.port)})")
                return (f"rsp leaks file descriptors: {len(fds)} open after the test, "
                        f"{self.baseline_fds} right after startup{pooled}:\n  " + "\n  ".join(fds))
            time.sleep(0.05)
        return None

    def settled(self):
        """True if the proxy holds no more fds than right after startup,
        not counting (with pooled=N) up to N idle pooled connections to
        each backend: those are kept for the next request, not leaked.
        The fds are read before and after the socket table, and only those
        open throughout are judged: a connection that opened or closed
        meanwhile (a health check's, every fraction of a second) is no
        leak, and must not be counted by one look and missed by the other."""
        if count_fds(self.pid) <= self.baseline_fds:
            return True
        if not self.pooled:
            return False
        stable, table = stable_fds(self.pid, lambda: tcp_sockets(self.pid))
        groups = pooled_groups(stable, table, self.port).values()
        return (all(len(fds) <= self.pooled for fds in groups)
                and len(stable) - sum(len(fds) for fds in groups) <= self.baseline_fds)

    def check_and_stop(self):
        """The teardown check. Returns a list of problems (empty if none):
        the proxy must still be running, hold no more fds than at startup,
        and have written nothing that looks like a crash on stderr."""
        problems = []
        if self.alive():
            try:
                problem = self._fd_problem()
            except OSError:  # it died while we looked: reported below
                problem = None
            if problem:
                problems.append(problem)
        was_running = self.alive()
        self.stop()
        # A proxy that died just before we looked at it ends with its own
        # status, not with the one our SIGTERM gives it.
        code = self.process.returncode
        # A test that stopped the proxy itself (wait_exit) asserted the
        # status it expects; an exit with status 0 is then no problem here.
        stopped_cleanly = self.stopped_by_test and not was_running and code == 0
        if not stopped_cleanly and (not was_running or code not in (-signal.SIGTERM, 0)):
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            problems.insert(0, f"rsp was not running at the end of the test: it {how}")
        stderr = self.stderr()
        for sign in CRASH_SIGNS:
            if sign in stderr:
                problems.append(f"rsp's stderr contains {sign!r}")
                break
        if problems:
            problems.append(self.describe())
        return problems

    def wait_exit(self, timeout):
        """For a test that stops the proxy itself (a SIGTERM or SIGINT of
        its own, stage 10 on): waits up to `timeout` seconds for the
        process to exit and returns its exit status (negative: killed by
        that signal), or None if it is still running. From then on the
        teardown check accepts that the proxy is gone if it exited with
        status 0."""
        self.stopped_by_test = True
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        stop_process(self.process)

    def __repr__(self):
        return f"<rsp pid {self.pid} on port {self.port}>"


def streamed(stage):
    """start_proxy options for a test of a request body streamed to the
    backend as it arrives (chapters 04-16): from stage 17 on, bodies are
    read whole before a backend is chosen unless request_buffering =
    false."""
    return {"request_buffering": False} if stage >= 17 else {}


def large_bodies(stage):
    """start_proxy options for a test that sends a request body over 1 MiB:
    from stage 22 on, max_body_size defaults to 1 MiB (as nginx's); this
    keeps the 100 MiB of stages 17 to 21."""
    return {"max_body_size": "100m"} if stage >= 22 else {}


def unbuffered(stage):
    """start_proxy options for a test of a response that waits in the
    backend while the client does not read (backpressure, chapter 04):
    from stage 17 on, rsp reads it into memory and a temporary file unless
    response_buffering = false."""
    return {"response_buffering": False} if stage >= 17 else {}
