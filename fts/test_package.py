"""The production path (stage 16 on): `make deb` builds a Debian package
that holds what a server needs and nothing of the developer's set; its files
pass their own tools' checks; the man pages render and name every setting;
`./setup-env.sh` leaves the daemons it installs for the tests disabled.

Like test_install.py these are about the repository (Makefile, dist/,
setup-env.sh), not about the binary under test: the package is built from
src/ into a temporary directory (`make deb DEB_DIR=...`), once per pytest
process. Installing it for real (apt install, rsp -t, apt purge) happens only
where that harms nobody: CI=true in the environment (.ci/run sets it), as
root, and no rsp installed already; everywhere else the package is unpacked
into a scratch directory (dpkg-deb -x) and checked there."""

import contextlib
import fcntl
import grp
import gzip
import os
import pwd
import re
import shutil
import stat
import subprocess
import tarfile

import pytest

# make deb compiles all of src/ (300 s allowed to it below, on a machine
# that runs several suites at once): pytest.ini's 120 s per test, which
# counts a fixture's setup, would cut it off first.
pytestmark = [pytest.mark.stage(16), pytest.mark.timeout(420)]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAKE_ENVIRONMENT = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DESTDIR", "PREFIX", "BINDIR", "DOCDIR",
                    "UNITDIR", "LOG_OWNER", "MANDIR", "INSTALL_BINARY", "DEB_DIR")
EXAMPLES = sorted(f for f in os.listdir(os.path.join(REPO, "examples")) if f.endswith(".lua"))

# Every file of the package, with its mode (directories aside).
PACKAGED = {
    "usr/sbin/rsp": 0o755,
    "lib/systemd/system/rsp.service": 0o644,
    "etc/rsp/rsp.lua": 0o644,
    "etc/logrotate.d/rsp": 0o644,
    "usr/share/man/man8/rsp.8.gz": 0o644,
    "usr/share/man/man5/rsp.lua.5.gz": 0o644,
    "usr/share/doc/rsp/README.md.gz": 0o644,
    "usr/share/doc/rsp/copyright": 0o644,
    "usr/share/doc/rsp/changelog.gz": 0o644,
    "usr/share/doc/rsp/rsp.lua.example": 0o644,
    **{f"usr/share/doc/rsp/examples/{name}": 0o644 for name in EXAMPLES},
}
PACKAGED_DIRS = ("var/lib/rsp", "var/log/rsp")
CONFFILES = ["/etc/logrotate.d/rsp", "/etc/rsp/rsp.lua"]
# The run-time libraries rsp links with, by the package that holds each.
RUNTIME_LIBRARIES = ("libc6", "libluajit", "libssl3")


def run(argv, timeout=60, **kwargs):
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv)} took over {timeout} s")


def version():
    with open(os.path.join(REPO, "src", "version.h")) as f:
        return re.search(r'#define RSP_VERSION "([^"]+)"', f.read()).group(1)


def config_settings():
    """The settings src/config_settings.c's table names (the names behind
    the typo warnings)."""
    with open(os.path.join(REPO, "src", "config_settings.c")) as f:
        m = re.search(r"const struct setting config_settings\[\] = \{(.*?)\n\};", f.read(), re.S)
    assert m, "src/config_settings.c has no config_settings[] table"
    return re.findall(r'(?:\{ |[A-Z]+\()"([a-z0-9_]+)"', m.group(1))


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    """The package `make deb DEB_DIR=tmp` builds (its path)."""
    if shutil.which("dpkg-deb") is None or shutil.which("dpkg-shlibdeps") is None:
        pytest.skip("dpkg-deb and dpkg-shlibdeps (dpkg-dev) are needed: ./setup-env.sh --build")
    out = tmp_path_factory.mktemp("deb")
    env = {k: v for k, v in os.environ.items() if k not in MAKE_ENVIRONMENT}
    result = run(["make", "-C", REPO, "deb", f"DEB_DIR={out}"], timeout=300, env=env)
    assert result.returncode == 0, f"make deb failed (status {result.returncode}):\n{result.stdout}\n{result.stderr}"
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    path = out / f"rsp_{version()}_{arch}.deb"
    assert path.is_file(), f"make deb did not write {path}:\n{result.stdout}"
    assert f"built {path}" in result.stdout, result.stdout
    return path


@pytest.fixture(scope="module")
def unpacked(deb, tmp_path_factory):
    """The package's files, unpacked with dpkg-deb -x (a scratch root)."""
    root = tmp_path_factory.mktemp("root")
    result = run(["dpkg-deb", "-x", str(deb), str(root)])
    assert result.returncode == 0, result.stderr
    return root


def control(deb):
    """The package's control fields: {name: value}."""
    result = run(["dpkg-deb", "--field", str(deb)])
    assert result.returncode == 0, result.stderr
    fields, name = {}, None
    for line in result.stdout.splitlines():
        if line.startswith(" ") and name:
            fields[name] += "\n" + line
        else:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return fields


# -- what the package holds ------------------------------------------------------

def test_deb_control_fields(deb):
    """dpkg-deb --info: package rsp at src/version.h's version for this
    machine's architecture, depending on the run-time libraries rsp links
    with (computed by dpkg-shlibdeps) and on adduser (postinst); its
    conffiles are the config and the logrotate snippet; its maintainer
    scripts are there and pass sh -n."""
    fields = control(deb)
    assert fields.get("Package") == "rsp", fields
    assert fields.get("Version") == version(), fields
    assert fields.get("Architecture") == run(["dpkg", "--print-architecture"]).stdout.strip(), fields
    depends = [d.strip() for d in fields.get("Depends", "").split(",")]
    for library in RUNTIME_LIBRARIES:
        assert any(d.startswith(library) for d in depends), f"Depends lacks {library}: {depends}"
    assert "adduser" in depends, depends
    for developer_tool in ("nginx", "haproxy", "chromium", "clang", "python3", "pebble", "valgrind"):
        assert not any(developer_tool in d for d in depends), f"Depends names {developer_tool}: {depends}"
    info = run(["dpkg-deb", "--info", str(deb)]).stdout
    for script in ("postinst", "prerm", "postrm", "conffiles", "md5sums"):
        assert re.search(rf"^\s+\d+ bytes,\s+\d+ lines\s+\*?\s+{script}\b", info, flags=re.M), info
    ctrl = deb.parent / "control.tar"
    with open(ctrl, "wb") as f:
        subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb)], stdout=f, check=True)
    with tarfile.open(ctrl) as tar:
        conffiles = tar.extractfile("./conffiles").read().decode().split()
        assert sorted(conffiles) == CONFFILES, conffiles
        for script in ("postinst", "prerm", "postrm"):
            member = tar.getmember(f"./{script}")
            assert member.mode & 0o111, f"{script} is not executable"
            text = tar.extractfile(member).read().decode()
            check = run(["sh", "-n", "-c", text])
            assert check.returncode == 0, f"{script}: {check.stderr}"
        postinst = tar.extractfile("./postinst").read().decode()
        assert re.search(r"adduser --system --group .*rsp", postinst.replace("\\\n", " ")), postinst
        postrm = tar.extractfile("./postrm").read().decode()
        assert "deluser" not in postrm, "purge must keep the system user (Debian policy)"


def test_deb_contents(deb):
    """dpkg-deb --contents: the binary in /usr/sbin, the unit in
    /lib/systemd/system, the logrotate snippet, the config, both man pages,
    the README, examples and copyright under /usr/share/doc/rsp, and
    /var/lib/rsp and /var/log/rsp; every file root's, with its mode;
    nothing else."""
    result = run(["dpkg-deb", "--contents", str(deb)])
    assert result.returncode == 0, result.stderr
    files, dirs = {}, set()
    for line in result.stdout.splitlines():
        mode, owner, _size, _date, _time, name = line.split(None, 5)
        name = name.removeprefix("./").rstrip("/")
        assert owner == "root/root", line
        if mode.startswith("d"):
            dirs.add(name)
        else:
            assert mode.startswith("-"), line
            bits = sum(0o400 >> i for i, c in enumerate(mode[1:10]) if c != "-")
            files[name] = bits
    assert files == PACKAGED, "packaged files differ: " + ", ".join(
        f"{p}: {oct(files[p]) if p in files else 'missing'} (expected "
        f"{oct(PACKAGED[p]) if p in PACKAGED else 'none'})"
        for p in sorted(set(files) | set(PACKAGED)) if files.get(p) != PACKAGED.get(p))
    for d in PACKAGED_DIRS:
        assert d in dirs, f"{d} is not in the package"


def test_deb_files_are_the_production_ones(unpacked):
    """The unpacked files: the unit runs /usr/sbin/rsp on /etc/rsp/rsp.lua;
    the config's user is the package's own system user, rsp, as logrotate's
    `create`; the config names /usr/share/doc/rsp, which holds the README and
    the examples, and no README.md or examples/ of the repository."""
    unit = (unpacked / "lib/systemd/system/rsp.service").read_text()
    assert re.search(r"^ExecStart=/usr/sbin/rsp /etc/rsp/rsp\.lua$", unit, flags=re.M), unit
    assert re.search(r"^ExecStartPre=/usr/sbin/rsp -t /etc/rsp/rsp\.lua$", unit, flags=re.M), unit
    assert not re.search(r"@[A-Z_]+@", unit), "a placeholder is left in the unit"
    config = (unpacked / "etc/rsp/rsp.lua").read_text()
    assert re.search(r'^user = "rsp"', config, flags=re.M), config
    assert "www-data" not in config, config
    assert re.search(r"^\s*create 0640 rsp adm$", (unpacked / "etc/logrotate.d/rsp").read_text(), flags=re.M)
    assert "/usr/share/doc/rsp/" in config, config
    doc = unpacked / "usr/share/doc/rsp"
    assert (doc / "README.md.gz").is_file() and (doc / "examples").is_dir()
    assert gzip.decompress((doc / "README.md.gz").read_bytes()).startswith(b"# rsp")
    assert "man rsp.lua" in config, config


def test_deb_binary_checks_the_packaged_config(unpacked, tmp_path):
    """The packaged rsp prints its version and checks the packaged config
    with -t. Unpacked, the config's user rsp may not exist here (postinst
    creates it): then -t fails naming that user and nothing else; with the
    user and the log directory moved to this machine's, -t says ok with no
    warning."""
    binary = str(unpacked / "usr/sbin/rsp")
    result = run([binary, "-v"])
    assert (result.returncode, result.stdout) == (0, f"rsp {version()}\n"), result
    config = unpacked / "etc/rsp/rsp.lua"
    try:
        pwd.getpwnam("rsp")
    except KeyError:
        result = run([binary, "-t", str(config)])
        assert result.returncode == 1, result
        assert 'no user "rsp"' in result.stderr and result.stderr.count("\n") == 1, result.stderr
    me = pwd.getpwuid(os.geteuid()).pw_name
    text, n = re.subn(r'^user = "rsp"', f'user = "{me}"', config.read_text(), flags=re.M)
    assert n == 1
    text, n = re.subn(r'"/var/log/rsp/', f'"{tmp_path}/', text)
    assert n == 1, "the packaged config must log under /var/log/rsp/"
    checked = tmp_path / "rsp.lua"
    checked.write_text(text)
    result = run([binary, "-t", str(checked)])
    assert result.returncode == 0, f"status {result.returncode}: {result.stdout}{result.stderr}"
    assert result.stdout == f"rsp: {checked}: ok\n" and "warning" not in result.stderr, result


def test_deb_passes_lintian(deb):
    """lintian (Debian's package checker), where it is installed: no error,
    no warning. (It is not part of ./setup-env.sh: it brings ~60 Perl
    packages.)"""
    lintian = shutil.which("lintian")
    if lintian is None:
        pytest.skip("lintian is not installed (apt-get install lintian)")
    result = run([lintian, "--fail-on", "error,warning", str(deb)], timeout=300)
    tags = [line for line in result.stdout.splitlines() if re.match(r"^[EW]: ", line)]
    assert result.returncode == 0 and not tags, f"lintian (status {result.returncode}):\n{result.stdout}{result.stderr}"


# -- the man pages ---------------------------------------------------------------

def man_text(page):
    """The page rendered by man -l, its warnings (--warnings) as a list."""
    env = dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
    result = run(["man", "--warnings", "-l", str(page)], env=env)
    assert result.returncode == 0, f"man -l {page}: status {result.returncode}: {result.stderr}"
    return re.sub(r".\x08", "", result.stdout), [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("page", ["usr/share/man/man8/rsp.8.gz", "usr/share/man/man5/rsp.lua.5.gz"])
def test_man_pages_render_without_warnings(unpacked, page):
    """man --warnings renders each packaged page with nothing to say, and
    groff -ww finds nothing either."""
    if shutil.which("man") is None or shutil.which("groff") is None:
        pytest.skip("man (man-db) and groff are not installed")
    _text, warnings = man_text(unpacked / page)
    assert not warnings, "\n".join(warnings)
    source = gzip.decompress((unpacked / page).read_bytes())
    result = subprocess.run(["groff", "-ww", "-man", "-z"], input=source, capture_output=True, timeout=60)
    assert result.returncode == 0 and not result.stderr, result.stderr.decode()


def test_rsp_8_names_every_option_and_signal(unpacked):
    """rsp(8) documents every option `rsp -h` lists, every signal rsp
    handles, and the exit statuses 0, 1 and 2."""
    if shutil.which("man") is None:
        pytest.skip("man (man-db) is not installed")
    text, _ = man_text(unpacked / "usr/share/man/man8/rsp.8.gz")
    usage = run([str(unpacked / "usr/sbin/rsp"), "--help"]).stdout
    options = set(re.findall(r"(?<![\w-])-{1,2}[a-z]+", usage))
    assert {"-t", "-v", "--version", "-h", "--help"} <= options, usage
    for option in options:
        assert option in text, f"rsp(8) does not mention {option}"
    for section in ("SYNOPSIS", "OPTIONS", "SIGNALS", "FILES", "EXIT STATUS"):
        assert re.search(rf"^{section}$", text, flags=re.M), f"rsp(8) has no {section} section"
    for signal_name in ("SIGHUP", "SIGTERM", "SIGINT", "SIGUSR1"):
        assert signal_name in text, f"rsp(8) does not mention {signal_name}"
    for status in ("0", "1", "2"):
        assert re.search(rf"^\s+{status}\s", text.split("EXIT STATUS", 1)[1], flags=re.M), status
    assert version() in text, f"rsp(8) does not give the version {version()}"


def test_rsp_lua_5_names_every_setting(unpacked):
    """rsp.lua(5) has a paragraph for every setting src/config.c reads
    (the names behind its typo warnings), each with its type and default;
    tools/settings-doc finds README.md's table and the page what
    doc/settings.txt makes."""
    if shutil.which("man") is None:
        pytest.skip("man (man-db) is not installed")
    text, _ = man_text(unpacked / "usr/share/man/man5/rsp.lua.5.gz")
    section = text.split("\nSETTINGS\n", 1)[1].split("\nFILES\n", 1)[0]
    tags = set(re.findall(r"^ {7}([a-z][a-z0-9_]*)\b", section, flags=re.M))  # http2_max_streams has a digit
    missing = [name for name in config_settings() if name not in tags]
    assert not missing, f"rsp.lua(5) lacks the settings {missing}"
    assert section.count("Type: ") == len(tags), section
    result = run([os.path.join(REPO, "tools", "settings-doc")])
    assert result.returncode == 0, result.stderr


# -- for real, on a throwaway machine ------------------------------------------------

@contextlib.contextmanager
def apt_turn():
    """One suite at a time installs and purges the package (suites run side
    by side on CI, each with its own workers)."""
    with open("/tmp/rsp-fts-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def test_deb_installs_and_purges_for_real(deb):
    """On CI's throwaway machine only (CI=true, root, no rsp installed):
    apt install ./rsp_*.deb creates the system user rsp and gives it
    /var/log/rsp, /var/lib/rsp and /var/lib/rsp/acme (0700), leaves the service disabled and
    stopped, and the installed rsp -t accepts the installed config (and
    creates the first access.log as logrotate's `create` makes the next
    ones: rsp's, group adm, 0640); man finds both pages; apt purge removes
    the files and the config and keeps the user."""
    if os.environ.get("CI") != "true" or os.geteuid() != 0:
        pytest.skip("installs a package for real: only with CI=true, as root (a throwaway machine)")
    apt = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=120"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with apt_turn():
        if run(["dpkg-query", "-W", "-f=${Status}", "rsp"]).stdout.startswith("install ok") or \
                os.path.exists("/usr/sbin/rsp"):
            pytest.skip("an rsp is installed on this machine already: not touching it")
        result = run([*apt, "install", str(deb)], timeout=300, env=env)
        try:
            assert result.returncode == 0, f"apt install: {result.stdout}{result.stderr}"
            user = pwd.getpwnam("rsp")
            assert user.pw_dir == "/var/lib/rsp" and user.pw_uid < 1000, user
            st = os.stat("/var/log/rsp")
            assert st.st_uid == user.pw_uid, "/var/log/rsp is not rsp's"
            assert stat.S_IMODE(os.stat("/var/lib/rsp").st_mode) == 0o750
            st = os.stat("/var/lib/rsp/acme")  # tls.acme's storage, rsp's alone
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (user.pw_uid, user.pw_gid, 0o700), st
            check = run(["/usr/sbin/rsp", "-t", "/etc/rsp/rsp.lua"])
            assert check.returncode == 0 and check.stdout == "rsp: /etc/rsp/rsp.lua: ok\n", check
            with open("/etc/logrotate.d/rsp") as f:
                create = re.search(r"^\s*create (\d+) (\S+) (\S+)$", f.read(), flags=re.M).groups()
            st = os.stat("/var/log/rsp/access.log")
            made = (f"{stat.S_IMODE(st.st_mode):04o}", pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name)
            assert made == create == ("0640", "rsp", "adm"), f"access.log is {made}; logrotate creates {create}"
            if shutil.which("systemctl"):
                enabled = run(["systemctl", "is-enabled", "rsp.service"]).stdout.strip()
                assert enabled == "disabled", f"rsp.service is {enabled!r} after install"
            if shutil.which("man"):
                assert run(["man", "-w", "rsp.lua"]).stdout.strip() == "/usr/share/man/man5/rsp.lua.5.gz"
                assert run(["man", "-w", "8", "rsp"]).stdout.strip() == "/usr/share/man/man8/rsp.8.gz"
        finally:
            purge = run([*apt, "purge", "rsp"], timeout=300, env=env)
        assert purge.returncode == 0, f"apt purge: {purge.stdout}{purge.stderr}"
        for gone in ("/usr/sbin/rsp", "/etc/rsp/rsp.lua", "/lib/systemd/system/rsp.service", "/var/log/rsp",
                     "/etc/logrotate.d/rsp"):
            assert not os.path.exists(gone), f"{gone} is left after apt purge"
        pwd.getpwnam("rsp")  # kept, as Debian's policy advises


# -- the developer's set-up --------------------------------------------------------

def test_setup_env_build_set_is_only_the_build():
    """./setup-env.sh --build --list: a compiler, pkg-config and the -dev
    libraries, no daemon and no test tool; the developer's set includes
    them all."""
    script = os.path.join(REPO, "setup-env.sh")
    build = run([script, "--build", "--list"]).stdout.split()
    assert set(build) == {"build-essential", "pkg-config", "libluajit-5.1-dev", "libssl-dev",
                          "libjansson-dev", "libnghttp2-dev", "zlib1g-dev", "libbrotli-dev",
                          "libzstd-dev", "libcrypt-dev"}, build
    everything = run([script, "--list"]).stdout.split()
    assert set(build) <= set(everything), everything
    assert {"nginx", "haproxy", "caddy"} <= set(everything)


@pytest.mark.parametrize("daemon", ["nginx", "haproxy", "caddy",
                                    pytest.param("php8.2-fpm", marks=pytest.mark.stage(23))])
def test_setup_env_leaves_daemons_disabled(daemon):
    """After ./setup-env.sh (which .ci/run runs first) nginx, haproxy, caddy and php-fpm,
    installed for the tests, do not start at boot: systemctl is-enabled
    says disabled (the tests start their own copies). Without systemctl
    the SysV start links are checked."""
    unit = f"/lib/systemd/system/{daemon}.service"
    if not os.path.exists(unit) and not os.path.exists(f"/etc/init.d/{daemon}"):
        pytest.skip(f"{daemon} is not installed")
    if shutil.which("systemctl"):
        state = run(["systemctl", "is-enabled", f"{daemon}.service"]).stdout.strip()
        assert state in ("disabled", "masked"), \
            f"{daemon}.service is {state!r}: ./setup-env.sh disables it (run it again), or you enabled it yourself"
        return
    starts = [f for d in (f"/etc/rc{n}.d" for n in "2345") if os.path.isdir(d) for f in os.listdir(d)
              if re.fullmatch(rf"S\d\d{daemon}", f)]
    if not os.path.isdir("/etc/rc2.d"):
        pytest.skip("neither systemctl nor SysV runlevel directories here")
    assert not starts, f"{daemon} starts at boot ({starts}): ./setup-env.sh disables it"
