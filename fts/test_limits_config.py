"""Every config error of stage 22's settings (issue 31), word for word:
the table form of listen and tls.listen (address, proxy_protocol),
trusted_proxies, limit_conn, limit_req (top level, site, pool),
basic_auth (its fields and its htpasswd file), allow and deny. For each,
rsp -t exits with status 1 and prints exactly one line,
"rsp: CONFIG: MESSAGE", the message naming the setting by its whole path
(sites["x"].limit_req.rate) and, for the htpasswd file, the file, the
line and the user. Last, one config that uses every new setting at once
is accepted."""

import os

import pytest

from proxy import run_rsp
from tlsutil import session_ca

pytestmark = pytest.mark.stage(22)

BACKEND = 'backends = { "127.0.0.1:8001" }\n'

# Hashes of "secret" (libcrypt's; rsp -t checks their form, not a password).
SHA512 = ("$6$saltsaltsalt$PMWE8DTlam1JU37Piyk43bHcMxTJq6sgu5DKB0/tGPjanN35jcY68QkpDfPFUGPWX5uCx"
          "IQkSPzMmqEiVNgts.")
BCRYPT = "$2b$05$abcdefghijklmnopqrstuuOQiyCxlgf/oeuTqixKmWdcYUh4Hjl0a"
YESCRYPT = "$y$j9T$abcdefghijklmnop$3dL1LkYnZM.OVXuVdnnaKVDlLYT92dRwOzDZ5XiVCe."

HASH_REFUSED = ("the hash is not bcrypt ($2b$, $2y$), sha512crypt ($6$) or yescrypt ($y$); "
                "plain, MD5 ($apr1$, $1$) and DES are refused")
HASH_MALFORMED = "the hash is cut short or has a character a crypt(3) hash does not"


def check(rsp, tmp_path, text, listen=True):
    """rsp -t on a config of a backend, `listen = 18080` (unless listen is
    False) and `text`: (config path, exit status, stderr)."""
    path = tmp_path / "limits.lua"
    path.write_text(("listen = 18080\n" if listen else "") + BACKEND + text + "\n")
    result = run_rsp(rsp, ["-t", str(path)], tmp_path)
    return path, result.returncode, result.stderr


def refused(rsp, tmp_path, text, message, listen=True):
    """Asserts rsp -t refuses `text` with exactly `message`."""
    path, status, stderr = check(rsp, tmp_path, text, listen)
    assert status == 1, f"rsp -t exited {status} on {text!r}: {stderr}"
    assert stderr == f"rsp: {path}: {message}\n", stderr


NO_ADDRESS = "has no 'address' (a port or \"ADDRESS:PORT\")"
LISTEN_FIELDS = "address, proxy_protocol"

# (the listen table's Lua, the message after "setting 'listen" / "setting 'tls.listen")
LISTEN_TABLES = [
    ("{}", "' " + NO_ADDRESS),
    ("{ proxy_protocol = true }", "' " + NO_ADDRESS),
    ("{ address = true }", ".address' must be a port or \"ADDRESS:PORT\", not a boolean"),
    ("{ address = {} }", ".address' must be a port or \"ADDRESS:PORT\", not a table"),
    ("{ address = 5.5 }", ".address' must be a port from 1 to 65535, not 5.5"),
    ("{ address = 70000 }", ".address' must be a port from 1 to 65535, not 70000"),
    ('{ address = "localhost" }', ".address' must be a port or \"ADDRESS:PORT\", not \"localhost\""),
    ('{ address = "::1:80" }', ".address' must be a port or \"ADDRESS:PORT\", not \"::1:80\""),
    ('{ address = "127.0.0.1:0" }', ".address': the port in \"127.0.0.1:0\" must be from 1 to 65535"),
    ('{ address = "127.0.0.1:80", proxy_protocol = "yes" }',
     ".proxy_protocol' must be true or false, not a string"),
    ('{ address = "127.0.0.1:80", proxy_protocol = 1 }',
     ".proxy_protocol' must be true or false, not a number"),
    ('{ address = "127.0.0.1:80", proxy_protocl = true }',
     "' has no field 'proxy_protocl' (it may have: " + LISTEN_FIELDS + ")"),
    ('{ adress = "127.0.0.1:80" }', "' has no field 'adress' (it may have: " + LISTEN_FIELDS + ")"),
    ('{ "127.0.0.1:80" }', "' has a number key; its fields are: " + LISTEN_FIELDS),
]


@pytest.mark.parametrize("table, message", LISTEN_TABLES, ids=[t for t, _ in LISTEN_TABLES])
def test_listen_table(rsp, tmp_path, table, message):
    refused(rsp, tmp_path, f"listen = {table}", "setting 'listen" + message, listen=False)


@pytest.mark.parametrize("table, message", LISTEN_TABLES, ids=[t for t, _ in LISTEN_TABLES])
def test_tls_listen_table(rsp, tmp_path, table, message):
    """tls.listen is read before the certificates: the same words, named
    tls.listen."""
    refused(rsp, tmp_path, f"tls = {{ listen = {table} }}", "setting 'tls.listen" + message)


def test_listen_table_refused_at_start_too(rsp, tmp_path):
    """Not only rsp -t: a start with the bad table exits with the message."""
    path = tmp_path / "start.lua"
    path.write_text(BACKEND + 'listen = { address = "127.0.0.1:18080", proxy_protocol = "on" }\n')
    result = run_rsp(rsp, [str(path)], tmp_path)
    assert result.returncode != 0, result.stderr
    assert f"rsp: {path}: setting 'listen.proxy_protocol' must be true or false, not a string\n" \
        in result.stderr, result.stderr


TRUSTED = "setting 'trusted_proxies'"
TRUSTED_ENTRY = TRUSTED + ": entry {} must be an address or a prefix (\"10.0.0.0/8\", \"::1\"), not {}"
TRUSTED_PROXIES = [
    ('"10.0.0.0/8"', TRUSTED + " must be a list of addresses or prefixes like { \"10.0.0.0/8\", \"::1\" }, "
                               "not a string"),
    ("true", TRUSTED + " must be a list of addresses or prefixes like { \"10.0.0.0/8\", \"::1\" }, "
                       "not a boolean"),
    ("{}", TRUSTED + " is an empty list"),
    ('{ "10.0.0.0/8", "10.0.0.0/33" }', TRUSTED_ENTRY.format(2, '"10.0.0.0/33"')),
    ('{ "::1/129" }', TRUSTED_ENTRY.format(1, '"::1/129"')),
    ('{ "10.0.0.1/" }', TRUSTED_ENTRY.format(1, '"10.0.0.1/"')),
    ('{ "proxy.example.com" }', TRUSTED_ENTRY.format(1, '"proxy.example.com"')),
    ('{ "10.0.0.1", 10 }', TRUSTED_ENTRY.format(2, "a number")),
    ('{ "10.0.0.1", {} }', TRUSTED_ENTRY.format(2, "a table")),
    ('{ lb = "10.0.0.1" }', TRUSTED + " must be a list, not have the field 'lb'"),
    ('{ "10.0.0.1", [3] = "10.0.0.3" }', TRUSTED + " must be a list without gaps, not have the key 3"),
    ('{ "10.0.0.1", [true] = "10.0.0.3" }', TRUSTED + " must be a list, not have a boolean key"),
]


@pytest.mark.parametrize("value, message", TRUSTED_PROXIES, ids=[v for v, _ in TRUSTED_PROXIES])
def test_trusted_proxies(rsp, tmp_path, value, message):
    refused(rsp, tmp_path, f"trusted_proxies = {value}", message)


LIMIT_CONN = [
    ("-1", "setting 'limit_conn' must be a number from 0 to 1000000"),
    ("1.5", "setting 'limit_conn' must be a whole number from 0 to 1000000"),
    ("1000001", "setting 'limit_conn' must be a number from 0 to 1000000"),
    ('"100"', "setting 'limit_conn' must be a number from 0 to 1000000"),
    ("{}", "setting 'limit_conn' must be a number from 0 to 1000000"),
]


@pytest.mark.parametrize("value, message", LIMIT_CONN, ids=[v for v, _ in LIMIT_CONN])
def test_limit_conn(rsp, tmp_path, value, message):
    refused(rsp, tmp_path, f"limit_conn = {value}", message)


def test_limit_conn_only_at_top_level(rsp, tmp_path):
    """A site has no limit_conn (connections are counted before a request
    names its site): the typo check names the site's fields."""
    path, status, stderr = check(rsp, tmp_path, 'sites = { ["x"] = { backends = { "127.0.0.1:8001" }, '
                                               'limit_conn = 3 } }')
    assert status == 1, stderr
    assert stderr.startswith(f"rsp: {path}: setting 'sites[\"x\"]' has no field 'limit_conn' (it may have: "), \
        stderr


RATE = "must be a number of requests a second above 0, at most 1000000"
BURST = "must be a whole number from 1 to 1000000"
LIMIT_REQ = [
    ("10", "' must be a table like { rate = 10, burst = 20 }, not a number"),
    ("{}", ".rate' " + RATE),
    ("{ burst = 5 }", ".rate' " + RATE),
    ("{ rate = 0 }", ".rate' " + RATE),
    ("{ rate = -1 }", ".rate' " + RATE),
    ("{ rate = 2e6 }", ".rate' " + RATE),
    ("{ rate = 0/0 }", ".rate' " + RATE),
    ("{ rate = 1/0 }", ".rate' " + RATE),
    ('{ rate = "10" }', ".rate' " + RATE),
    ("{ rate = 1, burst = 0 }", ".burst' " + BURST),
    ("{ rate = 1, burst = 1.5 }", ".burst' " + BURST),
    ("{ rate = 1, burst = 2e6 }", ".burst' " + BURST),
    ('{ rate = 1, burst = "2" }', ".burst' " + BURST),
    ("{ rate = 1, brust = 2 }", "' has no field 'brust' (it may have: rate, burst)"),
]
LEVELS = [
    ("top", "limit_req", "limit_req = {}"),
    ("site", 'sites["x"].limit_req', 'sites = { ["x"] = { backends = { "127.0.0.1:8001" }, limit_req = {} } }'),
    ("pool", "pools.p.limit_req", 'pools = { p = { backends = { "127.0.0.1:8001" }, limit_req = {} } }'),
]


@pytest.mark.parametrize("level, name, template", LEVELS, ids=[lv for lv, _, _ in LEVELS])
@pytest.mark.parametrize("value, message", LIMIT_REQ, ids=[v for v, _ in LIMIT_REQ])
def test_limit_req(rsp, tmp_path, level, name, template, value, message):
    """Each level's message names its own path (sites["x"].limit_req.rate)."""
    refused(rsp, tmp_path, template.replace("limit_req = {}", f"limit_req = {value}"),
            f"setting '{name}" + message)


def users_file(tmp_path, lines):
    """An htpasswd file of `lines` (after a comment and a blank line: the
    line numbers in messages count them)."""
    path = tmp_path / "htpasswd"
    path.write_text("# users\n\n" + "".join(line + "\n" for line in lines))
    return str(path)


TEXT = "must be a non-empty string (without quotes, backslashes or line breaks)"


@pytest.mark.parametrize("fields, message", [
    ('realm = "private"', ".users' " + TEXT),
    ('realm = "private", users = 5', ".users' " + TEXT),
    ('realm = "private", users = ""', ".users' " + TEXT),
    ("users = USERS", ".realm' " + TEXT),
    ("realm = 5, users = USERS", ".realm' " + TEXT),
    ('realm = "a\\"b", users = USERS', ".realm' " + TEXT),
    ('realm = "a\\nb", users = USERS', ".realm' " + TEXT),
    ('realm = "private", users = USERS, forward = "yes"', ".forward' must be true or false, not a string"),
    ('realm = "private", users = USERS, forward = 1', ".forward' must be true or false, not a number"),
    ('realm = "private", users = USERS, forwrd = true',
     "' has no field 'forwrd' (it may have: realm, users, forward)"),
], ids=["no users", "users a number", "users empty", "no realm", "realm a number", "realm with a quote",
        "realm with a newline", "forward a string", "forward a number", "forward misspelt"])
def test_basic_auth_fields(rsp, tmp_path, fields, message):
    users = users_file(tmp_path, ["alice:" + SHA512])
    refused(rsp, tmp_path, f'basic_auth = {{ {fields.replace("USERS", repr(users))} }}',
            "setting 'basic_auth" + message)


def test_basic_auth_not_a_table(rsp, tmp_path):
    refused(rsp, tmp_path, 'basic_auth = "/etc/rsp/htpasswd"',
            "setting 'basic_auth' must be a table like { realm = \"private\", users = \"/etc/rsp/htpasswd\" }, "
            "not a string")


def auth_refused(rsp, tmp_path, users, message, prefix=""):
    """basic_auth with users = `users` (at `prefix`: "" for the top level)
    is refused with "setting 'PREFIXbasic_auth.users': MESSAGE"."""
    auth = f'basic_auth = {{ realm = "private", users = "{users}" }}'
    if prefix:
        auth = f'sites = {{ ["x"] = {{ backends = {{ "127.0.0.1:8001" }}, {auth} }} }}'
    refused(rsp, tmp_path, auth, f"setting '{prefix}basic_auth.users': {message}")


def test_users_file_missing(rsp, tmp_path):
    missing = tmp_path / "no-such-htpasswd"
    auth_refused(rsp, tmp_path, missing, f"cannot open {missing}: No such file or directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_users_file_unreadable(rsp, tmp_path):
    users = users_file(tmp_path, ["alice:" + SHA512])
    os.chmod(users, 0)
    auth_refused(rsp, tmp_path, users, f"cannot open {users}: Permission denied")


def test_users_file_a_directory(rsp, tmp_path):
    auth_refused(rsp, tmp_path, tmp_path, f"cannot read {tmp_path}: Is a directory")


def test_users_file_without_users(rsp, tmp_path):
    users = users_file(tmp_path, ["# nobody yet"])
    auth_refused(rsp, tmp_path, users, f"{users} has no users")


@pytest.mark.parametrize("lines, number, user, words", [
    (["alice:" + SHA512, "bob:$apr1$abcdefgh$0123456789abcdefghijkl"], 4, "bob", HASH_REFUSED),
    (["alice:plainpassword"], 3, "alice", HASH_REFUSED),
    (["alice:" + BCRYPT, "carol:$6$saltsaltsalt$"], 4, "carol", HASH_MALFORMED),
    (["carol:$6$saltsaltsalt"], 3, "carol", HASH_MALFORMED),
    (["carol:" + BCRYPT[:-1]], 3, "carol", HASH_MALFORMED),
    (["carol:" + YESCRYPT + " "], 3, "carol", HASH_MALFORMED),
], ids=["apr1 MD5", "plain", "sha512crypt without its hash", "sha512crypt without its last $",
        "bcrypt a character short", "a space after the hash"])
def test_users_file_bad_hash(rsp, tmp_path, lines, number, user, words):
    """The message names the file, the line and the user."""
    users = users_file(tmp_path, lines)
    auth_refused(rsp, tmp_path, users, f"{users} line {number}, user '{user}': {words}")


def test_users_file_line_without_colon(rsp, tmp_path):
    users = users_file(tmp_path, ["alice:" + SHA512, "bob"])
    auth_refused(rsp, tmp_path, users, f"{users} line 4 is not user:hash")


def test_users_file_user_twice(rsp, tmp_path):
    """Two lines for one user: which password counts would be a guess."""
    users = users_file(tmp_path, ["alice:" + SHA512, "bob:" + BCRYPT, "alice:" + YESCRYPT])
    auth_refused(rsp, tmp_path, users, f"{users} line 5: user 'alice' is there twice")


def test_users_file_named_at_site_level(rsp, tmp_path):
    users = users_file(tmp_path, ["bob:$apr1$abcdefgh$0123456789abcdefghijkl"])
    auth_refused(rsp, tmp_path, users, f"{users} line 3, user 'bob': {HASH_REFUSED}", prefix='sites["x"].')


RULE = "[{}] must be \"all\", an address or a CIDR prefix like \"10.0.0.0/8\" or \"2001:db8::/32\""


@pytest.mark.parametrize("setting", ["allow", "deny"])
@pytest.mark.parametrize("value, message", [
    ('"10.0.0.0/8"', " must be a list like { \"10.0.0.0/8\", \"2001:db8::/32\" }, not a string"),
    ("{}", " is an empty list"),
    ('{ "10.0.0.0/33" }', RULE.format(1)),
    ('{ "10.0.0.1", 10 }', RULE.format(2)),
    ('{ "everyone" }', RULE.format(1)),
    ('{ "10.0.0.1", office = "10.0.0.2" }', " must be a list, not have the field 'office'"),
], ids=["a string", "empty", "/33", "a number", "a word", "a named entry"])
def test_allow_deny_top_level(rsp, tmp_path, setting, value, message):
    refused(rsp, tmp_path, f"{setting} = {value}", f"setting '{setting}'{message}")


def test_every_new_setting_at_once(rsp, tmp_path):
    """A config using every stage-22 setting, at every level it may have
    them, is accepted by rsp -t."""
    cert = session_ca().issue(tmp_path, "www", ["www.example.test"])
    users = users_file(tmp_path, ["alice:" + SHA512, "bob:" + BCRYPT, "carol:" + YESCRYPT])
    auth = f'basic_auth = {{ realm = "private", users = "{users}", forward = false }}'
    text = (f'listen = {{ address = "127.0.0.1:18080", proxy_protocol = true }}\n'
            f'tls = {{ listen = {{ address = "127.0.0.1:18443", proxy_protocol = false }}, '
            f'certificates = {{ {{ cert = "{cert.cert}", key = "{cert.key}" }} }} }}\n'
            'trusted_proxies = { "127.0.0.0/8", "10.0.0.0/8", "::1/128" }\n'
            'limit_req = { rate = 10, burst = 20 }\n'
            'limit_conn = 100\n'
            'max_body_size = "10m"\n'
            'allow = { "10.0.0.0/8", "2001:db8::/32", "127.0.0.1" }\n'
            'deny = { "10.1.2.3" }\n'
            f'{auth}\n'
            'pools = { p = { backends = { "127.0.0.1:8002" }, limit_req = { rate = 0.5 }, '
            f'max_body_size = "1k", allow = {{ "all" }}, deny = {{ "192.0.2.0/24" }}, {auth} }} }}\n'
            'sites = { ["www.example.test"] = { pool = "p", limit_req = { rate = 100, burst = 1000 }, '
            f'max_body_size = 0, deny = {{ "all" }}, allow = {{ "127.0.0.1" }}, {auth} }} }}\n')
    path = tmp_path / "every.lua"
    path.write_text(BACKEND + text)
    result = run_rsp(rsp, ["-t", str(path)], tmp_path)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr  # no error, no warning
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout
