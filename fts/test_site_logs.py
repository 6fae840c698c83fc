"""Per-site access logs (stage 19, issue 33): a site may name its own
access_log (and access_log_format, else the top-level one's), as nginx's
server-level access_log: its requests go there and NOT to the top-level
log; access_log = false turns its logging off; "stderr" works per site
too. Requests no site takes (the default site, rsp's own 421) go to the
top-level log. Sites naming one file share one descriptor and one buffer
(the same path, or another path to the same file). SIGUSR1 reopens every
log; a reload opens the new ones before it is accepted (one that cannot
be opened refuses the reload, naming the site, the setting and the path)
and closes those no generation uses any more.

And the first log file's ownership: created by rsp running as root with
`user` set, it is that user's and group adm's (else the user's own
group), 0640, as logrotate's `create 0640 USER adm` makes the next ones;
a file that exists keeps its group and mode.

Lines reach the files up to a second after the response: every read of a
log polls (bounded) until the expected lines are there."""

import grp
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading

import pytest

from checks import assert_config_error, log_lines, nobody
from client import request
from netutil import free_port, wait_for
from proxy import fd_targets, proxy_arguments, run_rsp
from test_access_log import parse, read_lines, wait_lines
from test_operations import config_path, sighup, sighup_failing
from test_workers import started_workers

pytestmark = pytest.mark.stage(19)

POLL_TIMEOUT = 5.0  # s: a bound on waiting for lines (rsp writes them at least once a second)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def ka(make_keepalive_backend):
    return make_keepalive_backend("ka")


def site(backend, **log):
    """A site's table: its backend and its log settings."""
    return {"backends": [backend], **log}


def ask(proxy, host, path):
    """One request for `host` (Connection: close); its status."""
    return request(proxy.port, path, host=host).status


def requests_in(path):
    """The request lines of the combined lines in the log at path."""
    return [parse(line)["request"] for line in read_lines(path)]


def fds_on(pid, path):
    """The fds of process pid open on the file at path (by its real path)."""
    real = os.path.realpath(path)
    return [fd for fd, target in fd_targets(pid).items() if target == real]


def reload_everywhere(proxy, generation, workers):
    """SIGHUP, then waits (bounded) until the master and each worker run
    `generation`: the next request is served under it, whichever serves."""
    sighup(proxy, generation)
    for n in range(1, workers + 1 if workers > 1 else 1):
        wait_for(lambda: log_lines(proxy, f"worker {n}: config reloaded: generation {generation}"),
                 f"worker {n} on generation {generation}", POLL_TIMEOUT)


def log_fds(pid, directory):
    """{path: how many fds process pid has open on it} for the *.log files
    in directory."""
    counts = {}
    for target in fd_targets(pid).values():
        if target.startswith(str(directory) + "/") and target.endswith(".log"):
            counts[target] = counts.get(target, 0) + 1
    return counts


def reload_with(rsp, proxy, tmp_path, options):
    """Rewrites the proxy's config with these options (no default site)."""
    (path,) = proxy_arguments(rsp.stage, proxy.port, [], str(tmp_path), options)
    assert path == config_path(proxy)


def test_two_sites_two_logs(ka, start_proxy, tmp_path):
    """a.test logs to a.log (combined), b.test to b.log in json (its own
    format); the default site's request and rsp's own 421 for a Host no
    site takes go to the top-level log, and no site's line does."""
    top, a_log, b_log = (str(tmp_path / name) for name in ("top.log", "a.log", "b.log"))
    proxy = start_proxy(ka, access_log=top, sites={"a.test": site(ka, access_log=a_log),
                                                   "b.test": site(ka, access_log=b_log, access_log_format="json")})
    for i in range(3):
        assert ask(proxy, "a.test", f"/a/{i}") == 200
        assert ask(proxy, "b.test", f"/b/{i}") == 200
    assert ask(proxy, "other.test", "/default") == 200
    assert ask(proxy, "A.TEST.", "/a/upper") == 200  # the same site, as routing finds it
    wait_lines(a_log, 4)
    assert requests_in(a_log) == [f"GET /a/{i} HTTP/1.1" for i in range(3)] + ["GET /a/upper HTTP/1.1"]
    objects = [json.loads(line) for line in wait_lines(b_log, 3)]
    assert [o["path"] for o in objects] == [f"/b/{i}" for i in range(3)], objects
    assert all(o["host"] == "b.test" and o["status"] == 200 for o in objects), objects
    wait_lines(top, 1)
    assert requests_in(top) == ["GET /default HTTP/1.1"]


def test_unknown_host_goes_to_the_top_level_log(ka, start_proxy, tmp_path):
    """Without a default site, a Host no site takes gets rsp's 421, logged
    in the top-level log; a site without a log of its own logs there too."""
    top, a_log = str(tmp_path / "top.log"), str(tmp_path / "a.log")
    proxy = start_proxy(access_log=top, sites={"a.test": site(ka, access_log=a_log), "c.test": [ka]})
    assert ask(proxy, "nowhere.test", "/unknown") == 421
    assert ask(proxy, "c.test", "/c") == 200
    assert ask(proxy, "a.test", "/a") == 200
    wait_lines(top, 2)
    assert requests_in(top) == ["GET /unknown HTTP/1.1", "GET /c HTTP/1.1"]
    assert [parse(line)["status"] for line in read_lines(top)] == ["421", "200"]
    wait_lines(a_log, 1)


def test_site_with_logging_off(ka, start_proxy, tmp_path):
    """access_log = false: the site's requests are logged nowhere. The
    top-level log gets the line of the request sent after them (one
    buffer, in order: a line of the quiet site would come before it)."""
    top = str(tmp_path / "top.log")
    proxy = start_proxy(ka, access_log=top, sites={"quiet.test": site(ka, access_log=False)})
    for i in range(3):
        assert ask(proxy, "quiet.test", f"/quiet/{i}") == 200
    assert ask(proxy, "other.test", "/loud") == 200
    wait_lines(top, 1)
    assert requests_in(top) == ["GET /loud HTTP/1.1"]
    assert "/quiet/" not in proxy.stderr() + proxy.stdout()


def test_site_without_any_top_level_log(ka, start_proxy, tmp_path):
    """Only a site has a log: it gets its lines; nothing else is written."""
    a_log = str(tmp_path / "a.log")
    proxy = start_proxy(ka, sites={"a.test": site(ka, access_log=a_log)})
    before = set(os.listdir(tmp_path))
    assert ask(proxy, "other.test", "/default") == 200
    assert ask(proxy, "a.test", "/a") == 200
    wait_lines(a_log, 1)
    assert requests_in(a_log) == ["GET /a HTTP/1.1"]
    assert set(os.listdir(tmp_path)) == before


def test_shared_file_opened_once(ka, start_proxy, tmp_path):
    """Three sites and the top level name one file, two of them by other
    paths to it (a "./" inside, a symlink): rsp holds it open once, and
    every line lands in it whole, in order."""
    shared = str(tmp_path / "shared.log")
    os.symlink(shared, str(tmp_path / "link.log"))
    proxy = start_proxy(ka, access_log=shared,
                        sites={"a.test": site(ka, access_log=shared),
                               "b.test": site(ka, access_log=str(tmp_path) + "/./shared.log"),
                               "c.test": site(ka, access_log=str(tmp_path / "link.log"))})
    assert len(fds_on(proxy.pid, shared)) == 1, f"rsp has {shared} open more than once: {fd_targets(proxy.pid)}"
    expected = []
    for i in range(2):
        for host in ("a.test", "b.test", "c.test", "other.test"):
            assert ask(proxy, host, f"/{host}/{i}") == 200
            expected.append(f"GET /{host}/{i} HTTP/1.1")
    wait_lines(shared, len(expected))
    assert requests_in(shared) == expected


@pytest.mark.parametrize("workers", [1, 2])
def test_sigusr1_reopens_every_log(ka, start_proxy, tmp_path, workers):
    """logrotate renames the three logs (top, a, b); lines of requests
    served meanwhile still go to the renamed files; after SIGUSR1 (to the
    master, which passes it on to each worker) every log is a fresh file
    at its path, with only the lines after it."""
    logs = {name: str(tmp_path / f"{name}.log") for name in ("top", "a", "b")}
    proxy = start_proxy(ka, access_log=logs["top"], workers=workers,
                        sites={"a.test": site(ka, access_log=logs["a"]), "b.test": site(ka, access_log=logs["b"])})
    if workers > 1:
        started_workers(proxy, workers)
    hosts = {"top": "other.test", "a": "a.test", "b": "b.test"}
    for name, host in hosts.items():
        assert ask(proxy, host, f"/{name}/before") == 200
    for name, path in logs.items():
        wait_lines(path, 1)
        os.rename(path, path + ".1")
    for name, host in hosts.items():
        assert ask(proxy, host, f"/{name}/renamed") == 200
    reopened = len(log_lines(proxy, "access_log: reopened"))
    proxy.process.send_signal(signal.SIGUSR1)
    processes = 1 if workers == 1 else 1 + workers  # the master reopens too, for workers to come
    wait_for(lambda: len(log_lines(proxy, "access_log: reopened")) == reopened + 3 * processes,
             f"{3 * processes} 'access_log: reopened' lines after SIGUSR1", POLL_TIMEOUT)
    for name, host in hosts.items():
        assert ask(proxy, host, f"/{name}/after") == 200
    for name, path in logs.items():
        wait_lines(path, 1)
        assert requests_in(path) == [f"GET /{name}/after HTTP/1.1"]
        assert requests_in(path + ".1") == [f"GET /{name}/before HTTP/1.1", f"GET /{name}/renamed HTTP/1.1"]


def test_workers_write_whole_lines(ka, start_proxy, tmp_path):
    """workers = 2, two sites with logs and long User-Agents: every line
    of each file parses, and each file has exactly its site's requests."""
    logs = {host: str(tmp_path / f"{host}.log") for host in ("a.test", "b.test")}
    proxy = start_proxy(ka, workers=2, sites={host: site(ka, access_log=path) for host, path in logs.items()})
    started_workers(proxy, 2)
    count = 60
    failures = []

    def send(host):
        for i in range(count):
            r = request(proxy.port, f"/{host}/{i}", host=host, headers=[("User-Agent", "u" * 2000 + str(i))])
            if r.status != 200:
                failures.append(r)

    threads = [threading.Thread(target=send, args=(host,)) for host in logs for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    for host, path in logs.items():
        lines = wait_lines(path, 2 * count)
        assert sorted(parse(line)["request"] for line in lines) == sorted(
            f"GET /{host}/{i} HTTP/1.1" for i in range(count) for _ in range(2))
        assert all(parse(line)["agent"].startswith("u" * 2000) for line in lines)


@pytest.mark.parametrize("workers", [1, 2])
def test_reload_adds_and_removes_site_logs(ka, start_proxy, rsp, tmp_path, workers):
    """Generation 1: a.test has a.log, b.test logs to the top-level log.
    A reload gives b.test b.log and takes a.test's away: the next lines
    go to b.log and the top-level log, a.log is closed (no fd left on it,
    in the master nor in a worker) with its lines of before the reload.
    Then after 20 reloads switching a site's log on and off, each process
    holds the top-level log and b.log once, and no other."""
    top, a_log, b_log = (str(tmp_path / name) for name in ("top.log", "a.log", "b.log"))
    proxy = start_proxy(access_log=top, workers=workers,
                        sites={"a.test": site(ka, access_log=a_log), "b.test": [ka]})
    pids = [proxy.pid] + (started_workers(proxy, workers) if workers > 1 else [])
    assert ask(proxy, "a.test", "/a/1") == 200
    assert ask(proxy, "b.test", "/b/1") == 200
    reload_with(rsp, proxy, tmp_path, {"access_log": top, "sites": {"a.test": [ka],
                                                                    "b.test": site(ka, access_log=b_log)}})
    reload_everywhere(proxy, 2, workers)
    assert ask(proxy, "a.test", "/a/2") == 200
    assert ask(proxy, "b.test", "/b/2") == 200
    wait_lines(b_log, 1)
    assert requests_in(b_log) == ["GET /b/2 HTTP/1.1"]
    wait_lines(top, 2)
    assert sorted(requests_in(top)) == ["GET /a/2 HTTP/1.1", "GET /b/1 HTTP/1.1"]
    assert requests_in(a_log) == ["GET /a/1 HTTP/1.1"]
    wait_for(lambda: not any(fds_on(pid, a_log) for pid in pids), "a.log closed once no generation uses it",
             POLL_TIMEOUT)
    on_off = str(tmp_path / "on-off.log")
    for generation in range(3, 23):
        sites = {"a.test": site(ka, access_log=on_off) if generation % 2 else [ka],
                 "b.test": site(ka, access_log=b_log)}
        reload_with(rsp, proxy, tmp_path, {"access_log": top, "sites": sites})
        reload_everywhere(proxy, generation, workers)
        assert ask(proxy, "a.test", f"/a/{generation}") == 200
    wait_for(lambda: all(log_fds(pid, tmp_path) == {top: 1, b_log: 1} for pid in pids),
             "each process holding top.log and b.log once, and no other log, after 20 reloads", POLL_TIMEOUT)
    wait_lines(on_off, 10)


def test_reload_with_a_log_that_cannot_be_opened(ka, start_proxy, rsp, tmp_path):
    """A reload naming a site log in a directory that does not exist is
    refused with one line naming the config, the site's setting and the
    path; the generation in service keeps serving and logging, and the
    new top-level log it named is not left open."""
    top, a_log = str(tmp_path / "top.log"), str(tmp_path / "a.log")
    proxy = start_proxy(access_log=top, sites={"a.test": site(ka, access_log=a_log)})
    missing = str(tmp_path / "no-such-dir" / "b.log")
    reload_with(rsp, proxy, tmp_path, {"access_log": str(tmp_path / "new-top.log"),
                                       "sites": {"a.test": site(ka, access_log=a_log),
                                                 "b.test": site(ka, access_log=missing)}})
    lines = sighup_failing(proxy)
    expected = (f"rsp: {config_path(proxy)}: setting 'sites[\"b.test\"].access_log': cannot open {missing}: "
                "No such file or directory")
    assert expected in lines, "\n".join(lines)
    assert ask(proxy, "a.test", "/a/after") == 200
    assert ask(proxy, "b.test", "/b/after") == 421
    wait_lines(a_log, 1)
    wait_lines(top, 1)
    assert requests_in(top) == ["GET /b/after HTTP/1.1"]
    assert not fds_on(proxy.pid, str(tmp_path / "new-top.log")), fd_targets(proxy.pid)


def test_site_log_on_stderr(ka, start_proxy, tmp_path):
    """A site's access_log = "stderr": its lines are on rsp's standard
    error; the other site's go to its file."""
    a_log = str(tmp_path / "a.log")
    proxy = start_proxy(sites={"a.test": site(ka, access_log=a_log), "e.test": site(ka, access_log="stderr")})
    assert ask(proxy, "e.test", "/on-stderr") == 200
    assert ask(proxy, "a.test", "/in-file") == 200
    wait_for(lambda: '"GET /on-stderr HTTP/1.1" 200' in proxy.stderr(), "the line on stderr", POLL_TIMEOUT)
    wait_lines(a_log, 1)
    assert requests_in(a_log) == ["GET /in-file HTTP/1.1"]


@pytest.mark.parametrize("value,words", [
    (5, ["must be a path", "not a number"]),
    (True, ["must be a path", "not true"]),
    ("", ["must be a path", "not an empty string"]),
])
def test_wrong_site_access_log_refused(rsp, tmp_path, value, words):
    """A site's access_log that is not a path, "stderr" or false: refused,
    naming the site and the setting."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [], str(tmp_path),
                              {"sites": {"a.test": site(("127.0.0.1", 9), access_log=value)}})
    assert_config_error(run_rsp(rsp, ["-t", path], str(tmp_path)), path, 'sites["a.test"].access_log',
                        words=words)


@pytest.mark.parametrize("log,value,words", [
    ("a.log", "xml", ['not "xml"']),
    ("a.log", 3, ["not a number"]),
    (None, "json", ["set 'sites[\"a.test\"].access_log' too"]),
    (False, "json", ["set 'sites[\"a.test\"].access_log' too"]),
])
def test_wrong_site_access_log_format_refused(rsp, tmp_path, log, value, words):
    """A site's access_log_format that is no format, or without the site's
    own access_log (its lines would land in the top-level log in another
    format than the others): refused, naming the site and the setting."""
    fields = {"access_log_format": value}
    if log is not None:
        fields["access_log"] = str(tmp_path / log) if isinstance(log, str) else log
    (path,) = proxy_arguments(rsp.stage, free_port(), [], str(tmp_path),
                              {"sites": {"a.test": site(("127.0.0.1", 9), **fields)}})
    assert_config_error(run_rsp(rsp, ["-t", path], str(tmp_path)), path, 'sites["a.test"].access_log_format',
                        words=words)


def test_check_opens_site_logs(rsp, tmp_path):
    """rsp -t opens every log as the start would: a site log in a
    directory that does not exist fails it, naming the site."""
    missing = str(tmp_path / "nowhere" / "a.log")
    (path,) = proxy_arguments(rsp.stage, free_port(), [], str(tmp_path),
                              {"sites": {"a.test": site(("127.0.0.1", 9), access_log=missing)}})
    assert_config_error(run_rsp(rsp, ["-t", path], str(tmp_path)), path, 'sites["a.test"].access_log',
                        words=[missing, "No such file or directory"])


# -- the first log file's owner ---------------------------------------------------

def log_group(user):
    """The group rsp gives a log file it creates for `user`: adm if the
    system has it, else the user's own."""
    try:
        return grp.getgrnam("adm").gr_gid
    except KeyError:
        return user.pw_gid


@pytest.fixture
def log_dir():
    """A 0755 directory of root's (nobody reaches the files in it but
    cannot create any), removed after the test."""
    directory = tempfile.mkdtemp(prefix="rsp-log-owner-")
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def assert_owned_as_logrotate_creates(path, user):
    st = os.stat(path)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (user.pw_uid, log_group(user), 0o640), (
        f"{path} is uid {st.st_uid} gid {st.st_gid} mode {stat.S_IMODE(st.st_mode):o}; logrotate creates "
        f"uid {user.pw_uid} gid {log_group(user)} mode 640")


def test_created_log_files_belong_to_the_user(ka, start_proxy, rsp, log_dir, tmp_path):
    """As root with user = "nobody", under umask 077: rsp -t and the start
    create the top-level and a site's log nobody's, group adm (or nobody's
    own), 0640: what logrotate's `create` makes of the next ones. The
    logrotate snippet says the same of the config's user (dist/)."""
    user = nobody()
    top, a_log = os.path.join(log_dir, "access.log"), os.path.join(log_dir, "a.log")
    options = {"user": "nobody", "access_log": top, "sites": {"a.test": site(ka, access_log=a_log)}}
    (path,) = proxy_arguments(rsp.stage, free_port(), [], str(tmp_path), options)
    os.chmod(str(tmp_path), 0o755)
    os.chmod(path, 0o644)
    old_umask = os.umask(0o077)
    try:
        result = run_rsp(rsp, ["-t", path], str(tmp_path))
    finally:
        os.umask(old_umask)
    assert result.returncode == 0, result.stderr
    for log in (top, a_log):
        assert_owned_as_logrotate_creates(log, user)
        os.unlink(log)
    old_umask = os.umask(0o077)
    try:
        proxy = start_proxy(**options)
    finally:
        os.umask(old_umask)
    assert ask(proxy, "a.test", "/a") == 200
    for log in (top, a_log):
        assert_owned_as_logrotate_creates(log, user)
    wait_lines(a_log, 1)
    # The config's user and group adm, 0640: what dist/rsp.logrotate creates.
    with open(os.path.join(REPO, "dist", "rsp.logrotate")) as f:
        create = re.search(r"^\s*create (\d+) (\S+) (\S+)$", f.read(), flags=re.M)
    with open(os.path.join(REPO, "dist", "rsp.lua")) as f:
        config_user = re.search(r'^user = "([^"]+)"', f.read(), flags=re.M)
    assert create and config_user, "no `create` line in dist/rsp.logrotate or no user in dist/rsp.lua"
    assert create.groups() == ("0640", config_user.group(1), "adm"), create.group(0)


def test_existing_log_file_keeps_its_group_and_mode(ka, start_proxy, log_dir):
    """A log file that exists (root's, group root, 0600) keeps its group
    and mode; it is handed to the user, as before, so that a reopen after
    SIGUSR1 works."""
    user = nobody()
    top = os.path.join(log_dir, "access.log")
    with open(top, "w"):
        pass
    os.chown(top, 0, 0)
    os.chmod(top, 0o600)
    proxy = start_proxy(ka, user="nobody", access_log=top)
    assert ask(proxy, "other.test", "/x") == 200
    st = os.stat(top)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (user.pw_uid, 0, 0o600), \
        f"uid {st.st_uid} gid {st.st_gid} mode {stat.S_IMODE(st.st_mode):o}"
    wait_lines(top, 1)
