"""`rsp -t` checks as the service will run (stage 19, issue 33): started as
root with user = "nobody", rsp reads its files as root, then drops to
nobody, who reads them again at every reload. A file only root may read
must fail `rsp -t` and the start, with one line naming the config, the
setting, the user and the file; files nobody can use pass as before.

Every test needs root (it runs rsp as root and relies on nobody not being
able to read root's 0600 files). The files live in a directory of their
own, 0755, so that nobody reaches them; the config is 0644 there (a
config nobody cannot read is a warning of its own: the last tests)."""

import os
import shutil
import subprocess
import tempfile

import pytest

from checks import assert_config_error, nobody
from netutil import LOOPBACK, free_port
from proxy import proxy_arguments, run_rsp

pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")
from tlsutil import session_ca  # noqa: E402

pytestmark = pytest.mark.stage(19)

NAME = "www.example.test"
BACKEND = (LOOPBACK, 9)


@pytest.fixture
def world():
    """A 0755 directory of root's (removed after the test) holding a
    certificate for NAME: world.dir, world.cert (its files: the key 0600,
    root's), world.user (nobody's passwd entry). Skips unless root."""
    user = nobody()
    directory = tempfile.mkdtemp(prefix="rsp-check-user-")
    try:
        os.chmod(directory, 0o755)
        cert = session_ca().issue(directory, "www", [NAME])
        os.chmod(cert.cert, 0o644)
        os.chmod(cert.key, 0o600)
        yield type("World", (), {"dir": directory, "cert": cert, "user": user})
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def write_config(rsp, world, options, user="nobody"):
    """The config (0644, in world.dir) with tls serving world.cert, user
    (None: no user) and `options`; returns its path."""
    options = {"tls": {"listen": f"{LOOPBACK}:{free_port()}", "certificates": [world.cert.entry()]}, **options}
    if user is not None:
        options["user"] = user
    (path,) = proxy_arguments(rsp.stage, free_port(), [BACKEND], world.dir, options)
    os.chmod(path, 0o644)
    return path


def assert_refused(rsp, world, path, setting, file):
    """rsp -t and a start both exit 1 with the same one line on stderr,
    naming the config, the setting, user nobody, the file and why."""
    line = assert_config_error(run_rsp(rsp, ["-t", path], world.dir), path, setting,
                               words=("user nobody", str(file), "Permission denied"), status=1)
    started = run_rsp(rsp, [path], world.dir)
    assert started.returncode == 1, f"the start did not refuse: {started.returncode}, {started.stderr!r}"
    assert started.stderr.splitlines() == [line], f"rsp -t said {line!r}, the start said {started.stderr!r}"
    return line


def assert_ok(rsp, world, path):
    """rsp -t says ok, exit 0, nothing on stderr."""
    result = run_rsp(rsp, ["-t", path], world.dir)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout
    assert result.stderr == "", result.stderr


def test_key_only_root_reads_is_refused(rsp, world):
    """certbot's way: the key 0600, root's. As root rsp could read it, but
    nobody cannot, and every reload would fail: refused by rsp -t and by
    the start, naming tls.certificates[1].key, nobody and the key."""
    path = write_config(rsp, world, {})
    line = assert_refused(rsp, world, path, "tls.certificates[1].key", world.cert.key)
    assert line == (f"rsp: {path}: setting 'tls.certificates[1].key': user nobody cannot read "
                    f"{world.cert.key} (Permission denied)"), line


@pytest.mark.parametrize("how", ["world-readable", "group"])
def test_files_the_user_reads_pass(rsp, world, how):
    """The same key readable by nobody, 0644 or 0640 in nobody's group (the
    README's deploy hook): ok, as before."""
    if how == "group":
        os.chown(world.cert.key, 0, world.user.pw_gid)
        os.chmod(world.cert.key, 0o640)
    else:
        os.chmod(world.cert.key, 0o644)
    assert_ok(rsp, world, write_config(rsp, world, {}))


def test_without_user_nothing_changes(rsp, world):
    """No `user`: rsp stays root, reads the 0600 key as root: ok."""
    assert_ok(rsp, world, write_config(rsp, world, {}, user=None))


def test_access_log_directory_the_user_cannot_reach(rsp, world):
    """The access log in a 0700 directory of root's: rsp would create the
    file as root and hand it to nobody, but nobody could never reopen it
    (SIGUSR1, logrotate): refused naming access_log and the directory."""
    os.chmod(world.cert.key, 0o644)
    logs = os.path.join(world.dir, "logs")
    os.mkdir(logs, 0o700)
    path = write_config(rsp, world, {"access_log": os.path.join(logs, "access.log")})
    assert_refused(rsp, world, path, "access_log", logs)


def test_site_access_log_directory_the_user_cannot_reach(rsp, world):
    """A site's own access log in a 0700 directory of root's (the
    top-level log and another site's in one nobody reaches): refused
    naming the site's access_log and that directory, and only it."""
    os.chmod(world.cert.key, 0o644)
    logs = os.path.join(world.dir, "logs")
    os.mkdir(logs, 0o700)
    sites = {NAME: {"backends": [BACKEND], "access_log": os.path.join(logs, "site.log")},
             "other.example.test": {"backends": [BACKEND], "access_log": os.path.join(world.dir, "other.log")}}
    path = write_config(rsp, world, {"access_log": os.path.join(world.dir, "access.log"), "sites": sites})
    line = assert_refused(rsp, world, path, f'sites["{NAME}"].access_log', logs)
    assert line == (f"rsp: {path}: setting 'sites[\"{NAME}\"].access_log': user nobody cannot reach the files "
                    f"in {logs} (Permission denied)"), line
    os.chmod(logs, 0o755)
    assert_ok(rsp, world, path)


def test_temp_dir_the_user_cannot_write(rsp, world):
    """temp_dir 0755, root's: nobody could make no temporary file for a
    large body: refused naming temp_dir."""
    os.chmod(world.cert.key, 0o644)
    temp = os.path.join(world.dir, "tmp")
    os.mkdir(temp, 0o755)
    path = write_config(rsp, world, {"temp_dir": temp})
    assert_refused(rsp, world, path, "temp_dir", temp)


def acme_config(rsp, world, ca_root):
    """A config with tls.acme (nothing contacted: rsp -t and a refused
    start order nothing), its ca_root given, storage in world.dir."""
    acme = {"agree_to_terms": True, "directory": f"https://{LOOPBACK}:{free_port()}/dir",
            "ca_root": ca_root, "storage": os.path.join(world.dir, "acme", "storage")}
    options = {"sites": {NAME: [BACKEND]}, "tls": {"listen": f"{LOOPBACK}:{free_port()}", "acme": acme},
               "user": "nobody"}
    (path,) = proxy_arguments(rsp.stage, free_port(), [], world.dir, options)
    os.chmod(path, 0o644)
    return path


def test_ca_root_only_root_reads_is_refused(rsp, world):
    """tls.acme.ca_root 0600, root's: the ACME client, running as nobody,
    could not read it: refused naming tls.acme.ca_root."""
    ca_root = os.path.join(world.dir, "root.pem")
    with open(ca_root, "wb") as f:
        f.write(session_ca().cert_pem)
    os.chmod(ca_root, 0o600)
    path = acme_config(rsp, world, ca_root)
    assert_refused(rsp, world, path, "tls.acme.ca_root", ca_root)
    os.chmod(ca_root, 0o644)
    assert_ok(rsp, world, path)
    assert not os.path.exists(os.path.join(world.dir, "acme")), "the storage was made though the start refused"


def test_ca_root_refused_when_loaded_as_the_user(rsp, world):
    """After the drop a reload loads the config as nobody: a ca_root it
    cannot read must be refused then too, naming the setting (not found
    only when the next order fails). Shown by rsp -t run as nobody."""
    ca_root = os.path.join(world.dir, "root.pem")
    with open(ca_root, "wb") as f:
        f.write(session_ca().cert_pem)
    os.chmod(ca_root, 0o600)
    path = acme_config(rsp, world, ca_root)
    user = world.user
    result = subprocess.run([rsp.binary, "-t", path], capture_output=True, text=True, cwd=world.dir, timeout=10,
                            stdin=subprocess.DEVNULL, user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    assert_config_error(result, path, "tls.acme.ca_root", words=(ca_root, "Permission denied"), status=1)


def test_config_the_user_cannot_read_is_a_warning(rsp, world):
    """The config 0600, root's: rsp runs on what it loaded, but every
    reload (made as nobody) would fail: rsp -t still says ok, with one
    warning line naming the file and nobody."""
    os.chmod(world.cert.key, 0o644)
    path = write_config(rsp, world, {})
    os.chmod(path, 0o600)
    result = run_rsp(rsp, ["-t", path], world.dir)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rsp: {path}: warning: user nobody cannot read {path}"), \
        result.stderr
    assert "reload" in lines[0], lines[0]

