"""basic_auth (stage 22, issue 31): users from an htpasswd file of
crypt(3) hashes (bcrypt $2b$/$2y$, sha512crypt $6$, yescrypt $y$; plain,
MD5 and DES refused at load, naming the file, the line and the user);
missing, wrong and malformed credentials get 401 with WWW-Authenticate;
the file is re-read on reload; the Authorization header does not reach
the backend unless forward = true. The hashes are made here with
Python's crypt module (libcrypt's crypt())."""

import base64
import signal
import warnings

import pytest

from backends import KeepAliveBackend
from client import Conn
from netutil import wait_for
from proxy import proxy_arguments, run_rsp

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    crypt = pytest.importorskip("crypt", reason="Python's crypt module (gone in 3.13) makes the hashes")

pytestmark = pytest.mark.stage(22)

RELOAD_TIMEOUT = 10.0  # s: a bound on waiting for the reload (never a measurement)

CHALLENGE = 'Basic realm="private", charset="UTF-8"'
SALTS = {
    "bcrypt-2b": "$2b$05$abcdefghijklmnopqrstuv",
    "bcrypt-2y": "$2y$05$abcdefghijklmnopqrstuv",
    "sha512crypt": "$6$saltsaltsalt$",
    "yescrypt": "$y$j9T$abcdefghijklmnop$",
}


def hashed(password, salt):
    h = crypt.crypt(password, salt)
    assert h and h.startswith(salt[:3]), f"libcrypt made no {salt[:4]} hash: {h!r}"
    return h


def credentials(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def app():
    backend = KeepAliveBackend("app")
    yield backend
    backend.stop()


def write_users(path, users):
    """users: [(name, hash)] -> an htpasswd file with a comment and a blank line."""
    path.write_text("# users\n\n" + "".join(f"{u}:{h}\n" for u, h in users))
    return str(path)


def get(proxy, headers=()):
    with Conn(proxy.port) as c:
        return c.request("GET", "/private", list(headers))


@pytest.mark.parametrize("kind", list(SALTS))
def test_each_hash_kind(start_proxy, app, tmp_path, kind):
    """The right password gets through; the backend does not see it."""
    users = write_users(tmp_path / "htpasswd", [("alice", hashed("s3cret:with colon", SALTS[kind]))])
    proxy = start_proxy(app, basic_auth={"realm": "private", "users": users})
    r = get(proxy, [("Authorization", credentials("alice", "s3cret:with colon"))])
    assert r.status == 200, r
    (record,) = app.records
    assert record.header("Authorization") is None, record.headers
    # And again (the cache of verified values answers it).
    assert get(proxy, [("Authorization", credentials("alice", "s3cret:with colon"))]).status == 200


@pytest.mark.parametrize("value", [
    None,
    credentials("alice", "wrong"),
    credentials("bob", "pw"),
    credentials("alice", "pw") + "=",
    "Basic " + base64.b64encode(b"alicepw").decode(),     # no colon
    "Basic YWxpY2U6cHc",                                   # unpadded
    "Basic !!!!",
    "Bearer " + base64.b64encode(b"alice:pw").decode(),
    "Basic",
    "Basic " + "A" * 5000,
], ids=["missing", "wrong-password", "unknown-user", "extra-padding", "no-colon", "unpadded", "not-base64",
        "other-scheme", "empty", "too-long"])
def test_refused_credentials(start_proxy, app, tmp_path, value):
    users = write_users(tmp_path / "htpasswd", [("alice", hashed("pw", SALTS["sha512crypt"]))])
    proxy = start_proxy(app, basic_auth={"realm": "private", "users": users})
    r = get(proxy, [("Authorization", value)] if value is not None else [])
    assert r.status == 401, r
    assert r.header_values("www-authenticate") == [CHALLENGE], r.headers
    assert app.requests == 0, "a refused request reached the backend"


def test_forward_true_keeps_the_header(start_proxy, app, tmp_path):
    users = write_users(tmp_path / "htpasswd", [("alice", hashed("pw", SALTS["bcrypt-2b"]))])
    proxy = start_proxy(app, basic_auth={"realm": "private", "users": users, "forward": True})
    value = credentials("alice", "pw")
    assert get(proxy, [("Authorization", value)]).status == 200
    (record,) = app.records
    assert record.header("Authorization") == value, record.headers


def test_per_site_and_pool(start_proxy, app, tmp_path):
    """A site's basic_auth, a pool's, and a site with none."""
    users = write_users(tmp_path / "htpasswd", [("alice", hashed("pw", SALTS["sha512crypt"]))])
    auth = {"realm": "private", "users": users}
    proxy = start_proxy(app, pools={"p": {"backends": [app], "basic_auth": auth}},
                        sites={"a.example": {"backends": [app], "basic_auth": auth},
                               "p.example": {"pool": "p"}, "open.example": [app]})
    for host, status in (("a.example", 401), ("p.example", 401), ("open.example", 200)):
        with Conn(proxy.port, host=host) as c:
            assert c.request("GET", "/").status == status, host
    with Conn(proxy.port, host="p.example") as c:
        assert c.request("GET", "/", [("Authorization", credentials("alice", "pw"))]).status == 200


def test_reload_rereads_the_file(start_proxy, app, tmp_path, rsp):
    path = tmp_path / "htpasswd"
    write_users(path, [("alice", hashed("old", SALTS["sha512crypt"]))])
    options = {"basic_auth": {"realm": "private", "users": str(path)}}
    proxy = start_proxy(app, **options)
    assert get(proxy, [("Authorization", credentials("alice", "old"))]).status == 200
    write_users(path, [("alice", hashed("new", SALTS["sha512crypt"]))])
    proxy.process.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded " in proxy.stderr() or "reload failed" in proxy.stderr(), "the reload",
             RELOAD_TIMEOUT)
    assert "reload failed" not in proxy.stderr(), proxy.stderr()
    assert get(proxy, [("Authorization", credentials("alice", "old"))]).status == 401
    assert get(proxy, [("Authorization", credentials("alice", "new"))]).status == 200


@pytest.mark.parametrize("hash_text, kind", [
    ("plainpassword", "plain"),
    ("$apr1$abcdefgh$0123456789abcdefghijkl", "apr1"),
    ("$1$abcdefgh$0123456789abcdefghijkl", "md5"),
    ("abJnggxhB/yWI", "des"),
])
def test_unsupported_hashes_refused(rsp, tmp_path, hash_text, kind):
    users = write_users(tmp_path / "htpasswd", [("alice", hashed("pw", SALTS["yescrypt"])), ("bob", hash_text)])
    path = tmp_path / "auth.lua"
    path.write_text('listen = 18080\nbackends = { "127.0.0.1:8001" }\n'
                    f'basic_auth = {{ realm = "private", users = "{users}" }}\n')
    result = run_rsp(rsp, ["-t", str(path)], tmp_path)
    assert result.returncode != 0, result.stderr
    assert f"setting 'basic_auth.users': {users} line 4, user 'bob': the hash is not" in result.stderr, \
        result.stderr
