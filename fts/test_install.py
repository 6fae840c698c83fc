"""`make install` (stage 11): what it puts where, with which modes, that it
never overwrites an operator's config, what `make uninstall` leaves, and
that the installed files pass their own tools' checks: `rsp -t` for the
config, `systemd-analyze verify` for the unit, `logrotate -d` for the
logrotate snippet.

These tests are about the repository (Makefile and dist/), not about the
binary under test: they run `make install` at the top of the repository
into DESTDIR=tmp_path. `make install` builds src/rsp first if it is out of
date (./run_integration_tests has built it already)."""

import os
import pathlib
import pwd
import grp
import re
import shutil
import stat
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST = os.path.join(REPO, "dist")
PREFIX = "/usr/local"

EXAMPLES = sorted(f for f in os.listdir(os.path.join(REPO, "examples")) if f.endswith(".lua"))
# Every file `make install PREFIX=/usr/local` installs, with its mode.
INSTALLED = {
    "usr/local/bin/rsp": 0o755,
    "usr/local/share/doc/rsp/rsp.lua.example": 0o644,
    "usr/local/share/doc/rsp/README.md": 0o644,
    **{f"usr/local/share/doc/rsp/examples/{name}": 0o644 for name in EXAMPLES},
    "usr/local/share/man/man8/rsp.8": 0o644,
    "usr/local/share/man/man5/rsp.lua.5": 0o644,
    "etc/rsp/rsp.lua": 0o644,
    "usr/local/lib/systemd/system/rsp.service": 0o644,
    "etc/logrotate.d/rsp": 0o644,
}
# Where the unit goes, by PREFIX: where systemd looks for that prefix's units.
UNIT_PATHS = {"/usr/local": "usr/local/lib/systemd/system/rsp.service",
              "/opt/rsp": "etc/systemd/system/rsp.service"}
LOG_DIR = "var/log/rsp"  # created, empty

# Variables the Makefile reads with ?= : from the environment they would
# win over PREFIX on the command line. MAKEFLAGS and friends come from a
# make that runs the suite (make test).
MAKE_ENVIRONMENT = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DESTDIR", "PREFIX", "BINDIR", "DOCDIR",
                    "UNITDIR", "LOG_OWNER", "MANDIR", "INSTALL_BINARY")


def make(target, destdir, prefix=PREFIX):
    """Runs `make TARGET DESTDIR=destdir PREFIX=prefix` at the top of the
    repository; fails the test if it fails. Returns its output."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_ENVIRONMENT}
    try:
        result = subprocess.run(["make", "-C", REPO, target, f"DESTDIR={destdir}", f"PREFIX={prefix}"],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                                timeout=100)
    except subprocess.TimeoutExpired:
        pytest.fail(f"make {target} took over 100 s")
    assert result.returncode == 0, \
        f"make {target} failed (status {result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def tree(root):
    """{relative path: mode bits} of every file and directory under root."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def files_in(root):
    """The relative paths of the regular files under root."""
    return {p for p in tree(root) if os.path.isfile(os.path.join(root, p))}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def service_settings(unit_text):
    """The [Service] section's settings: {key: [values]}, comments left out."""
    settings, section = {}, None
    for line in unit_text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def installed_config(docdir="/usr/local/share/doc/rsp"):
    """dist/rsp.lua as make install installs it: naming its DOCDIR."""
    return read(os.path.join(DIST, "rsp.lua")).replace(b"/usr/share/doc/rsp", docdir.encode())


def example_setting(name):
    """A top-level NAME = VALUE of dist/rsp.lua, as written."""
    m = re.search(rf"^{name}\s*=\s*(.+?)\s*(?:--.*)?$", read(os.path.join(DIST, "rsp.lua")).decode(),
                  flags=re.M)
    assert m, f"dist/rsp.lua does not set {name}"
    return m.group(1)


def run(argv, timeout=10, **kwargs):
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv[0]} took over {timeout} s")


def supports_stage_10(binary):
    """None if `binary -v` says rsp 0.10 or later, else why not."""
    result = run([binary, "-v"])
    m = re.match(r"rsp (\d+)\.(\d+)\.(\d+)$", (result.stdout + result.stderr).strip())
    if result.returncode != 0 or not m or (int(m.group(1)), int(m.group(2))) < (0, 10):
        return (f"{binary} -v did not print rsp 0.10.0 or later (status {result.returncode}, "
                f"{(result.stdout + result.stderr).strip()[:200]!r}): no `rsp -t` yet")
    return None


# -- what make install puts where ------------------------------------------------

@pytest.mark.stage(11)
def test_install_puts_every_file_in_place(tmp_path):
    """make install PREFIX=/usr/local DESTDIR=tmp installs exactly the binary,
    the config and its example copy, the README and the examples, the man
    pages, the unit (in /usr/local/lib/systemd/system, where systemd looks
    for the administrator's units, not the distribution's /lib) and the
    logrotate snippet, with their modes, and an empty log directory; the
    copies are dist/'s (the unit aside: it is made from dist/rsp.service.in;
    the config names the DOCDIR it was installed with)."""
    make("install", tmp_path)
    found = tree(tmp_path)
    files = {p: mode for p, mode in found.items() if os.path.isfile(tmp_path / p)}
    assert files == INSTALLED, "installed files and modes differ: " + ", ".join(
        f"{p}: {oct(files[p]) if p in files else 'missing'} (expected "
        f"{oct(INSTALLED[p]) if p in INSTALLED else 'none'})"
        for p in sorted(set(files) | set(INSTALLED)) if files.get(p) != INSTALLED.get(p))
    assert os.path.isdir(tmp_path / LOG_DIR) and not os.listdir(tmp_path / LOG_DIR)
    assert found[LOG_DIR] == 0o755
    assert read(tmp_path / "usr/local/bin/rsp") == read(os.path.join(REPO, "src", "rsp"))
    assert read(tmp_path / "etc/rsp/rsp.lua") == installed_config()
    assert read(tmp_path / "usr/local/share/doc/rsp/rsp.lua.example") == installed_config()
    assert read(tmp_path / "etc/logrotate.d/rsp") == read(os.path.join(DIST, "rsp.logrotate"))
    assert read(tmp_path / "usr/local/share/man/man8/rsp.8") == read(os.path.join(DIST, "rsp.8"))
    assert read(tmp_path / "usr/local/share/man/man5/rsp.lua.5") == read(os.path.join(DIST, "rsp.lua.5"))
    if os.geteuid() == 0:
        # Root hands the log directory to the config's user, as Debian does
        # for nginx: rsp reopens its log after dropping to that user.
        try:
            owner = pwd.getpwnam("www-data").pw_uid, grp.getgrnam("adm").gr_gid
        except KeyError:
            return
        st = os.stat(tmp_path / LOG_DIR)
        assert (st.st_uid, st.st_gid) == owner, f"{LOG_DIR} is owned by {st.st_uid}:{st.st_gid}"


@pytest.mark.stage(11)
@pytest.mark.parametrize("prefix", ["/usr/local", "/opt/rsp"])
def test_unit_runs_the_installed_binary(tmp_path, prefix):
    """The installed unit names the binary where PREFIX put it (for checking
    the config first and for running it), reloads with SIGHUP to the main
    process, stops with SIGTERM and waits longer than the example's
    shutdown_timeout; no @PLACEHOLDER@ is left."""
    make("install", tmp_path, prefix=prefix)
    binary = f"{prefix}/bin/rsp"
    assert os.access(tmp_path / binary.lstrip("/"), os.X_OK)
    text = (tmp_path / UNIT_PATHS[prefix]).read_text()
    assert not re.search(r"@\w+@", text), f"a placeholder is left: {re.search(r'@[A-Z_]+@', text)}"
    service = service_settings(text)
    assert service.get("ExecStartPre") == [f"{binary} -t /etc/rsp/rsp.lua"], service.get("ExecStartPre")
    assert service.get("ExecStart") == [f"{binary} /etc/rsp/rsp.lua"], service.get("ExecStart")
    assert service.get("ExecReload") == ["/bin/kill -HUP $MAINPID"], service.get("ExecReload")
    assert service.get("KillSignal") == ["SIGTERM"]
    assert float(service["TimeoutStopSec"][-1]) > float(example_setting("shutdown_timeout"))
    # rsp changes user itself (user = in the config): systemd must start it as
    # root, and the non-root alternative is there, commented.
    assert "User" not in service and "AmbientCapabilities" not in service
    for line in ("#User=www-data", "#AmbientCapabilities=CAP_NET_BIND_SERVICE",
                 "#CapabilityBoundingSet=CAP_NET_BIND_SERVICE"):
        assert line in text.splitlines(), f"the non-root alternative lacks {line!r}"
    assert "ReadWritePaths" in service and "/var/log/rsp" in service["ReadWritePaths"][-1].split()


# -- the operator's config, and uninstalling --------------------------------------

@pytest.mark.stage(11)
def test_second_install_keeps_a_changed_config(tmp_path):
    """An operator's /etc/rsp/rsp.lua survives make install; the example
    in the doc directory is refreshed."""
    make("install", tmp_path)
    config = tmp_path / "etc/rsp/rsp.lua"
    mine = b'-- mine\nlisten = 8080\nbackends = { "127.0.0.1:9000" }\n'
    config.write_bytes(mine)
    example = tmp_path / "usr/local/share/doc/rsp/rsp.lua.example"
    example.write_bytes(b"-- stale\n")
    output = make("install", tmp_path)
    assert config.read_bytes() == mine, f"make install overwrote the config:\n{output}"
    assert example.read_bytes() == installed_config()
    assert files_in(tmp_path) == set(INSTALLED)


@pytest.mark.stage(11)
@pytest.mark.parametrize("prefix", ["/usr/local", "/opt/rsp"])
def test_installed_config_names_installed_docs(tmp_path, prefix):
    """Every absolute path the installed config's comments name under
    PREFIX/share/doc/rsp is installed (the README, the examples), and the
    config points at no README.md or examples/ of the repository, which a
    server does not have."""
    make("install", tmp_path, prefix=prefix)
    text = (tmp_path / "etc/rsp/rsp.lua").read_text()
    docdir = f"{prefix}/share/doc/rsp"
    assert docdir + "/" in text, f"the installed config does not name {docdir}:\n{text}"
    assert "/usr/share/doc/rsp" not in text or prefix == "/usr", text
    for named in re.findall(r"\(([\w.]+/?)\)", text):
        if named in ("README.md", "examples/"):
            assert (tmp_path / docdir.lstrip("/") / named).exists(), f"{docdir}/{named} is not installed"
    for name in EXAMPLES:
        assert (tmp_path / docdir.lstrip("/") / "examples" / name).is_file()
    assert (tmp_path / docdir.lstrip("/") / "README.md").is_file()


@pytest.mark.stage(11)
def test_uninstall_keeps_config_and_logs(tmp_path):
    """make uninstall removes the binary, the unit, the logrotate snippet,
    the man pages and the doc, and keeps /etc/rsp and /var/log/rsp with
    what is in them."""
    make("install", tmp_path)
    (tmp_path / LOG_DIR / "access.log").write_text("a line\n")
    make("uninstall", tmp_path)
    assert files_in(tmp_path) == {"etc/rsp/rsp.lua", f"{LOG_DIR}/access.log"}
    assert not os.path.exists(tmp_path / "usr/local/share/doc/rsp")
    # Twice is harmless.
    make("uninstall", tmp_path)
    assert files_in(tmp_path) == {"etc/rsp/rsp.lua", f"{LOG_DIR}/access.log"}


# -- the installed files pass their tools' checks ----------------------------------

@pytest.mark.stage(11)
def test_example_config_passes_rsp_t(shared_dir):
    """The installed rsp checks the installed config with -t: `rsp: FILE:
    ok`, status 0, no warning (a setting rsp does not know would get one);
    a broken copy gets status 1 and no ok. The install goes to a directory
    every user may traverse: from stage 19 on, rsp -t run as root checks
    that the config's `user` can reach what the config names."""
    tmp_path = pathlib.Path(shared_dir)
    make("install", tmp_path)
    binary = str(tmp_path / "usr/local/bin/rsp")
    why_not = supports_stage_10(binary)
    if why_not:
        pytest.skip(why_not)
    # The check runs as on the installed system, whose log directory is
    # DESTDIR/var/log/rsp here.
    text, n = re.subn(r'"/var/log/rsp/', f'"{tmp_path}/var/log/rsp/', (tmp_path / "etc/rsp/rsp.lua").read_text())
    assert n == 1, "the example config must set access_log under /var/log/rsp/"
    config = tmp_path / "checked.lua"
    config.write_text(text)
    result = run([binary, "-t", str(config)])
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"rsp -t {config}: status {result.returncode}: {output}"
    assert f"rsp: {config}: ok" in output.splitlines(), output
    assert "warning" not in output, output

    broken = tmp_path / "broken.lua"
    broken.write_text(text + '\nbalance = "random"\n')
    result = run([binary, "-t", str(broken)])
    output = result.stdout + result.stderr
    assert result.returncode == 1, f"rsp -t {broken}: status {result.returncode}: {output}"
    assert "ok" not in output.split(), output
    assert str(broken) in output and "balance" in output, output


@pytest.mark.stage(11)
def test_unit_passes_systemd_analyze_verify(tmp_path):
    """systemd-analyze verify finds nothing to say about the installed unit
    (pointed at the DESTDIR copy of the binary, which verify wants to find
    executable)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package)")
    # First a unit that cannot be wrong: if verify fails on it, it cannot
    # work here (no systemd in a container, say), and says nothing of ours.
    sane = tmp_path / "sane"
    sane.mkdir()
    (sane / "sane.service").write_text("[Service]\nExecStart=/bin/true\n")
    result = run([analyze, "verify", "--man=no", str(sane / "sane.service")], timeout=60)
    if result.returncode != 0 or "sane.service" in result.stdout + result.stderr:
        pytest.skip(f"systemd-analyze verify does not work here: {(result.stdout + result.stderr)[:300]}")

    destdir = tmp_path / "dest"
    make("install", destdir)
    text = (destdir / UNIT_PATHS[PREFIX]).read_text()
    text = text.replace(f"{PREFIX}/bin/rsp", f"{destdir}{PREFIX}/bin/rsp")
    unit = tmp_path / "verify" / "rsp.service"
    unit.parent.mkdir()
    unit.write_text(text)
    result = run([analyze, "verify", "--man=no", str(unit)], timeout=60)
    output = result.stdout + result.stderr
    ours = [line for line in output.splitlines() if "rsp.service" in line]
    assert result.returncode == 0 and not ours, f"systemd-analyze verify (status {result.returncode}):\n{output}"


def logrotate_binary():
    return shutil.which("logrotate") or next(
        (p for p in ("/usr/sbin/logrotate", "/sbin/logrotate") if os.access(p, os.X_OK)), None)


@pytest.mark.stage(11)
def test_logrotate_snippet_passes_logrotate_d(tmp_path):
    """logrotate -d (a dry run: it changes nothing and runs no script),
    forced, on the installed snippet with its path moved into DESTDIR:
    no error, and it would rename access.log, create a new one 0640 for
    www-data:adm, and run the postrotate script once."""
    logrotate = logrotate_binary()
    if logrotate is None:
        pytest.skip("logrotate is not installed (Debian's logrotate package)")
    make("install", tmp_path / "dest")
    logs = tmp_path / "dest" / LOG_DIR
    (logs / "access.log").write_text('127.0.0.1 - - [25/Nov/2026:12:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "curl"\n')
    text, n = re.subn(r"^/var/log/rsp/", f"{logs}/", (tmp_path / "dest/etc/logrotate.d/rsp").read_text(),
                      flags=re.M)
    assert n == 1, "the snippet must be about /var/log/rsp/*.log"
    config = tmp_path / "rsp.logrotate"
    config.write_text(text)
    result = run([logrotate, "-d", "-f", "-s", str(tmp_path / "state"), str(config)], timeout=30)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"logrotate -d: status {result.returncode}:\n{output}"
    assert not [line for line in output.splitlines() if line.startswith("error")], output
    assert f"renaming {logs}/access.log to {logs}/access.log.1" in output, output
    try:
        owner = f"uid = {pwd.getpwnam('www-data').pw_uid} gid = {grp.getgrnam('adm').gr_gid}"
    except KeyError:
        owner = ""
    assert re.search(rf"creating new {re.escape(str(logs))}/access.log mode = 0640 {owner}", output), output
    assert output.count("running postrotate script") == 1, output


@pytest.mark.stage(11)
@pytest.mark.parametrize("systemctl_status", [0, 1], ids=["rsp-running", "rsp-not-running"])
def test_logrotate_postrotate_signals_rsp(tmp_path, systemctl_status):
    """The snippet's postrotate script sends SIGUSR1 to rsp.service and
    succeeds whether or not rsp is running (a stand-in systemctl records
    the call and succeeds, or fails as for a unit that is not active)."""
    text = read(os.path.join(DIST, "rsp.logrotate")).decode()
    m = re.search(r"^\s*postrotate\s*\n(.*?)^\s*endscript\s*$", text, flags=re.M | re.S)
    assert m, "dist/rsp.logrotate has no postrotate script"
    script = m.group(1)
    assert "systemctl" in script and "/systemctl" not in script, \
        "the postrotate script should run systemctl by name (as logrotate's PATH finds it)"
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "calls"
    (fake / "systemctl").write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'[ {systemctl_status} = 0 ] || echo "Failed to kill unit rsp.service: Unit rsp.service not loaded." >&2\n'
        f'exit {systemctl_status}\n')
    os.chmod(fake / "systemctl", 0o755)
    env = dict(os.environ, PATH=f"{fake}:/usr/sbin:/usr/bin:/sbin:/bin")
    # logrotate runs the script with sh -c, the log pattern as $1.
    result = run(["/bin/sh", "-c", script, "logrotate", "/var/log/rsp/*.log"], env=env)
    assert result.returncode == 0, f"status {result.returncode}: {result.stdout}{result.stderr}"
    assert calls.exists(), "the script did not run systemctl"
    args = calls.read_text().split()
    assert "rsp.service" in args and any(a in ("USR1", "SIGUSR1", "-sUSR1", "--signal=USR1",
                                               "--signal=SIGUSR1") for a in args), args
