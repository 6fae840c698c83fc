"""The settings of stage 21 (root, compress, headers, error_pages): every
mistake refused by rsp -t and at the start with exit status 1 and one line
naming the file and the setting, as the same line a refused reload logs
while the old config goes on serving; valid configs accepted; a pool of
files (root, no backends) listed in /status.json, /metrics and the status
page, with health checks on, through reloads; and, started as root with
`user`, a root or an error page that user cannot use refused."""

import os
import shutil
import tempfile

import pytest

from checks import assert_config_error, nobody
from netutil import LOOPBACK, free_port, wait_until_listening
from proxy import lua_string, run_rsp
from test_operations import served_by_each, sighup, sighup_failing
from test_status import ask_status, metrics, status_json, wait_status

pytestmark = pytest.mark.stage(21)

POLL_TIMEOUT = 10.0  # s: bounds a wait for the status listener


@pytest.fixture
def files(tmp_path):
    """A directory to serve (tmp_path/www, with 404.html and 502.html) and
    files and paths that are wrong in one way each."""
    www = tmp_path / "www"
    www.mkdir()
    (www / "404.html").write_text("<h1>not here</h1>\n")
    (www / "502.html").write_text("<h1>backend down</h1>\n")
    (tmp_path / "big.html").write_bytes(b"x" * (1024 * 1024 + 1))
    (tmp_path / "exactly-1mib.html").write_bytes(b"x" * (1024 * 1024))
    return type("Files", (), {"www": str(www), "page": str(www / "404.html"), "page502": str(www / "502.html"),
                              "big": str(tmp_path / "big.html"), "max": str(tmp_path / "exactly-1mib.html"),
                              "file": str(www / "404.html"), "missing": str(tmp_path / "nosuch")})


def config_text(port, body):
    """A config listening on 127.0.0.1:port with the Lua text `body`."""
    return f"listen = {lua_string(f'{LOOPBACK}:{port}')}\n{body}\n"


def write(tmp_path, port, body):
    """Writes config_text to tmp_path/rsp-PORT.lua; returns its path."""
    path = str(tmp_path / f"rsp-{port}.lua")
    with open(path, "w") as f:
        f.write(config_text(port, body))
    return path


def check(rsp, tmp_path, body):
    """rsp -t of a config with `body`: (the result, the config's path)."""
    path = write(tmp_path, free_port(), body)
    return run_rsp(rsp, ["-t", path], tmp_path), path


# (id, Lua text given the files fixture, setting named, words of the line)
CONFIG_ERRORS = [
    # root
    ("root-relative", lambda f: 'root = "www"', "root", ["www: must be an absolute path"]),
    ("root-missing-dir", lambda f: f"root = {lua_string(f.missing)}", "root",
     ["nosuch: No such file or directory"]),
    ("root-a-file", lambda f: f"root = {lua_string(f.file)}", "root", [": not a directory"]),
    ("root-number", lambda f: "root = 1", "root", ["must be the path of a directory"]),
    ("root-empty", lambda f: 'root = ""', "root", ["must be the path of a directory"]),
    ("root-and-backends", lambda f: f'root = {lua_string(f.www)}\nbackends = {{ "127.0.0.1:9" }}', "root",
     ["a pool has backends or root, not both"]),
    ("pool-root-and-backends",
     lambda f: f'pools = {{ static = {{ root = {lua_string(f.www)}, backends = {{ "127.0.0.1:9" }} }} }}\n'
               f'backends = {{ "127.0.0.1:9" }}', "pools.static", ["a pool has backends or root, not both"]),
    ("pool-neither", lambda f: 'pools = { static = { balance = "least_conn" } }\nbackends = { "127.0.0.1:9" }',
     "pools.static.backends", ["is missing", "backends or root"]),
    ("pool-root-missing", lambda f: f'pools = {{ static = {{ root = {lua_string(f.missing)} }} }}\n'
                                    f'backends = {{ "127.0.0.1:9" }}',
     "pools.static.root", ["No such file or directory"]),
    ("site-root-missing", lambda f: f'sites = {{ ["example.org"] = {{ root = {lua_string(f.missing)} }} }}',
     'sites["example.org"].root', ["nosuch: No such file or directory"]),
    ("site-root-and-backends",
     lambda f: f'sites = {{ ["example.org"] = {{ root = {lua_string(f.www)}, backends = {{ "127.0.0.1:9" }} }} }}',
     'sites["example.org"]', ["a pool has backends or root, not both"]),
    ("site-pool-and-root",
     lambda f: f'pools = {{ static = {{ root = {lua_string(f.www)} }} }}\n'
               f'sites = {{ ["example.org"] = {{ pool = "static", root = {lua_string(f.www)} }} }}',
     'sites["example.org"]', ["names a pool and its own root"]),
    # compress
    ("compress-number", lambda f: "compress = 1", "compress", ["true, false or a table"]),
    ("compress-typo", lambda f: "compress = { tipes = { \"text/html\" } }", "compress",
     ["no field 'tipes'", "types, min_length"]),
    ("compress-types-string", lambda f: 'compress = { types = "text/html" }', "compress.types",
     ["list of media types"]),
    ("compress-types-empty", lambda f: "compress = { types = {} }", "compress.types", ["empty"]),
    ("compress-type-no-slash", lambda f: 'compress = { types = { "text" } }', "compress.types[1]",
     ['"text" is not a media type']),
    ("compress-type-star-type", lambda f: 'compress = { types = { "text/html", "*/*" } }', "compress.types[2]",
     ['"*/*" is not a media type']),
    ("compress-type-star-inside", lambda f: 'compress = { types = { "text/ht*ml" } }', "compress.types[1]",
     ["is not a media type"]),
    ("compress-type-space", lambda f: 'compress = { types = { "text/ html" } }', "compress.types[1]",
     ["is not a media type"]),
    ("compress-type-number", lambda f: "compress = { types = { 7 } }", "compress.types[1]",
     ["a number is not a media type"]),
    ("compress-min-length-negative", lambda f: "compress = { min_length = -1 }", "compress.min_length",
     ["whole number of bytes from 0 to 4294967296"]),
    ("compress-min-length-fraction", lambda f: "compress = { min_length = 2.5 }", "compress.min_length",
     ["whole number"]),
    ("compress-min-length-huge", lambda f: "compress = { min_length = 2^32 + 1 }", "compress.min_length",
     ["whole number"]),
    ("compress-min-length-nan", lambda f: "compress = { min_length = 0/0 }", "compress.min_length",
     ["whole number"]),
    ("pool-compress", lambda f: f'pools = {{ static = {{ root = {lua_string(f.www)}, compress = "yes" }} }}\n'
                                f'backends = {{ "127.0.0.1:9" }}', "pools.static.compress", ["not a string"]),
    ("site-compress-typo", lambda f: f'sites = {{ ["example.org"] = {{ root = {lua_string(f.www)}, '
                                     f'compress = {{ min_lenght = 1 }} }} }}',
     'sites["example.org"].compress', ["no field 'min_lenght'"]),
    # headers
    ("headers-string", lambda f: 'headers = "X-A: 1"', "headers", ["must be a table"]),
    ("headers-bad-name", lambda f: 'headers = { ["X A"] = "1" }', "headers", ['"X A" is not a valid header name']),
    ("headers-number-key", lambda f: 'headers = { "X-A" }', "headers", ["every key must be a header name"]),
    ("headers-crlf", lambda f: 'headers = { ["X-A"] = "1\\r\\nSet-Cookie: a=b" }', 'headers["X-A"]',
     ["control character"]),
    ("headers-nul", lambda f: 'headers = { ["X-A"] = "1\\0" }', 'headers["X-A"]', ["control character"]),
    ("headers-true", lambda f: 'headers = { ["X-A"] = true }', 'headers["X-A"]', ["string", "or false", "not true"]),
    ("headers-number-value", lambda f: 'headers = { ["X-A"] = 1 }', 'headers["X-A"]', ["not a number"]),
    ("headers-same-name-twice", lambda f: 'headers = { ["X-A"] = "1", ["x-a"] = "2" }', "headers",
     ["are the same header", "X-A", "x-a"]),
    ("site-headers-bad-name",
     lambda f: f'sites = {{ ["example.org"] = {{ root = {lua_string(f.www)}, headers = {{ ["a:b"] = "1" }} }} }}',
     'sites["example.org"].headers', ["is not a valid header name"]),
] + [
    (f"headers-refused-{name.lower()}", lambda f, name=name: f'headers = {{ ["{name}"] = "1" }}',
     f'headers["{name}"]', [f"rsp sets the '{name}' header itself"])
    for name in ("Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE",
                 "Trailer", "Content-Encoding", "Content-Range", "Proxy-Connection")
] + [
    ("headers-refused-any-case-removed", lambda f: 'headers = { ["content-length"] = false }',
     'headers["content-length"]', ["rsp sets the 'content-length' header itself"]),
    # error_pages
    ("error-pages-string", lambda f: f"error_pages = {lua_string(f.page)}", "error_pages", ["must be a table"]),
    ("error-pages-399", lambda f: f"error_pages = {{ [399] = {lua_string(f.page)} }}", "error_pages",
     ["from 400 to 599", "not 399"]),
    ("error-pages-600", lambda f: f"error_pages = {{ [600] = {lua_string(f.page)} }}", "error_pages",
     ["from 400 to 599", "not 600"]),
    ("error-pages-fraction", lambda f: f"error_pages = {{ [404.5] = {lua_string(f.page)} }}", "error_pages",
     ["from 400 to 599"]),
    ("error-pages-typo", lambda f: "error_pages = { backend = true }", "error_pages",
     ["no field 'backend'", "backends"]),
    ("error-pages-list", lambda f: f"error_pages = {{ {lua_string(f.page)} }}", "error_pages",
     ["from 400 to 599", "not 1"]),
    ("error-pages-backends-string", lambda f: 'error_pages = { backends = "yes" }', "error_pages.backends",
     ["true or false"]),
    ("error-pages-relative", lambda f: 'error_pages = { [404] = "404.html" }', "error_pages[404]",
     ["404.html: must be an absolute path"]),
    ("error-pages-missing", lambda f: f"error_pages = {{ [404] = {lua_string(f.missing)} }}", "error_pages[404]",
     ["nosuch: No such file or directory"]),
    ("error-pages-directory", lambda f: f"error_pages = {{ [404] = {lua_string(f.www)} }}", "error_pages[404]",
     ["www: not a regular file"]),
    ("error-pages-too-big", lambda f: f"error_pages = {{ [500] = {lua_string(f.big)} }}", "error_pages[500]",
     ["big.html: larger than 1 MiB"]),
    ("error-pages-number", lambda f: "error_pages = { [404] = 404 }", "error_pages[404]",
     ["must be the path of a file"]),
    ("pool-error-pages-missing",
     lambda f: f'pools = {{ static = {{ root = {lua_string(f.www)}, error_pages = {{ [502] = {lua_string(f.missing)} }} }} }}\n'
               f'backends = {{ "127.0.0.1:9" }}', "pools.static.error_pages[502]", ["No such file or directory"]),
    ("site-error-pages-missing",
     lambda f: f'sites = {{ ["example.org"] = {{ backends = {{ "127.0.0.1:9" }}, '
               f'error_pages = {{ [503] = {lua_string(f.missing)} }} }} }}',
     'sites["example.org"].error_pages[503]', ["No such file or directory"]),
]


@pytest.mark.parametrize("make, setting, words", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_bad_setting_refused(rsp, tmp_path, files, make, setting, words):
    """rsp -t exits 1 with one line on stderr, "rsp: PATH: setting 'NAME'
    ...", naming the setting and what is wrong; a start says the same line
    and exits 1."""
    body = make(files)
    if not any(f"{name} =" in body for name in ("root", "backends", "sites")):
        body += f"\nroot = {lua_string(files.www)}"
    checked, path = check(rsp, tmp_path, body)
    line = assert_config_error(checked, path, setting, words=words, status=1)
    assert line.startswith(f"rsp: {path}: setting '{setting}'"), line
    started = run_rsp(rsp, [path], tmp_path)
    assert started.returncode == 1, f"exit status {started.returncode}, stderr: {started.stderr!r}"
    assert started.stderr.splitlines() == [line], f"rsp -t said {line!r}, a start said {started.stderr!r}"


# (id, Lua text given the files fixture): configs rsp must accept
VALID = [
    ("top-root", lambda f: f"root = {lua_string(f.www)}"),
    ("top-root-trailing-slash", lambda f: f"root = {lua_string(f.www + '/')}"),
    ("compress-true", lambda f: f"root = {lua_string(f.www)}\ncompress = true"),
    ("compress-false", lambda f: f"root = {lua_string(f.www)}\ncompress = false"),
    ("compress-table", lambda f: f"root = {lua_string(f.www)}\ncompress = {{ types = {{ \"Text/*\", "
                                 f"\"application/*+json\", \"image/svg+xml\" }}, min_length = 0 }}"),
    ("compress-min-length-max", lambda f: f"root = {lua_string(f.www)}\ncompress = {{ min_length = 2^32 }}"),
    ("compress-empty-table", lambda f: f"root = {lua_string(f.www)}\ncompress = {{}}"),
    ("headers", lambda f: f"root = {lua_string(f.www)}\nheaders = {{ [\"X-Frame-Options\"] = \"DENY\", "
                          f"Server = false, [\"X-Empty\"] = \"\", [\"X-Tab\"] = \"a\\tb\", "
                          f"[\"Content-Type\"] = \"text/plain\" }}"),
    ("headers-empty", lambda f: f"root = {lua_string(f.www)}\nheaders = {{}}"),
    ("error-pages", lambda f: f"root = {lua_string(f.www)}\nerror_pages = {{ [404] = {lua_string(f.page)}, "
                              f"[502] = {lua_string(f.page502)}, [400] = {lua_string(f.page)}, "
                              f"[599] = {lua_string(f.page)}, backends = true }}"),
    ("error-page-of-1mib", lambda f: f"root = {lua_string(f.www)}\nerror_pages = {{ [500] = {lua_string(f.max)} }}"),
    ("error-pages-empty", lambda f: f"root = {lua_string(f.www)}\nerror_pages = {{ backends = false }}"),
    ("every-level",
     lambda f: f'backends = {{ "127.0.0.1:9" }}\ncompress = true\nheaders = {{ Server = "rsp" }}\n'
               f'error_pages = {{ [404] = {lua_string(f.page)} }}\n'
               f'pools = {{ static = {{ root = {lua_string(f.www)}, compress = false, headers = {{ server = false }}, '
               f'error_pages = {{ [502] = {lua_string(f.page502)}, backends = true }}, health_check = false }},\n'
               f'          app = {{ backends = {{ "127.0.0.1:9" }}, headers = {{ ["X-App"] = "1" }} }} }}\n'
               f'sites = {{ ["a.example.org"] = {{ pool = "static", headers = {{ ["X-Site"] = "a" }} }},\n'
               f'          ["b.example.org"] = {{ root = {lua_string(f.www)}, compress = {{ types = {{ "text/html" }} }} }},\n'
               f'          ["c.example.org"] = {{ pool = "app", error_pages = {{}} }} }}'),
    ("sites-only-root", lambda f: f'sites = {{ ["example.org"] = {{ root = {lua_string(f.www)} }} }}'),
]


@pytest.mark.parametrize("make", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_settings_accepted(rsp, tmp_path, files, make):
    """rsp -t says "rsp: PATH: ok" and exits 0, with nothing on stderr
    (no warning: every name is a setting)."""
    checked, path = check(rsp, tmp_path, make(files))
    assert checked.returncode == 0, f"exit status {checked.returncode}, stderr: {checked.stderr!r}"
    assert checked.stdout == f"rsp: {path}: ok\n", checked.stdout
    assert checked.stderr == "", checked.stderr


def test_misspelt_setting_warns(rsp, tmp_path, files):
    """A global one letter away from a new setting ("compres") is most
    likely a typo: rsp -t warns naming the setting, and accepts the file."""
    checked, path = check(rsp, tmp_path, f"root = {lua_string(files.www)}\ncompres = true")
    assert checked.returncode == 0, checked.stderr
    assert "'compres' is not a setting; did you mean 'compress'?" in checked.stderr, checked.stderr


def start_files_proxy(start_proxy, tmp_path, body):
    """rsp with `body` and a status listener; proxy.status_port is set and
    proxy.write(body) rewrites its config (for a reload)."""
    port, status_port = free_port(), free_port()

    def write_body(text):
        return write(tmp_path, port, f"{text}\nstatus_listen = {lua_string(f'{LOOPBACK}:{status_port}')}")
    proxy = start_proxy(args=[write_body(body)], port=port)
    wait_until_listening(status_port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = status_port
    proxy.write = write_body
    return proxy


def pool_body(files, backend, health=""):
    """Lua text: the default site proxies to backend, pool static serves
    files.www, site files.test names static."""
    return (f'backends = {{ "{backend.host}:{backend.port}" }}\n{health}\n'
            f'pools = {{ static = {{ root = {lua_string(files.www)} }} }}\n'
            f'sites = {{ ["files.test"] = {{ pool = "static" }} }}')


def test_root_pool_in_status(make_backend, start_proxy, tmp_path, files):
    """A pool of files is listed in /status.json with its root and no
    backends, beside the default site's pool whose backend is listed as
    before; /metrics and the status page still answer 200; the startup log
    says the pool serves files."""
    backend = make_backend("a")
    proxy = start_files_proxy(start_proxy, tmp_path, pool_body(files, backend))
    pools = {p["name"]: p for p in status_json(proxy)["pools"]}
    assert pools["static"]["root"] == files.www and pools["static"]["backends"] == [], pools
    assert isinstance(pools["static"]["balance"], str), pools
    assert [b["name"] for b in pools["default"]["backends"]] == [f"{backend.host}:{backend.port}"], pools
    assert "root" not in pools["default"], pools
    families = metrics(proxy)
    assert families, "no metrics"
    page = ask_status(proxy.status_port, "/")
    assert page.status == 200 and f"files from {files.www}".encode() in page.body, page.body[:2000]
    assert f"pool static: files from {files.www}" in proxy.stderr(), proxy.stderr()
    assert served_by_each(proxy) == ["a"] * 4


def test_root_pool_with_health_checks(make_backend, start_proxy, tmp_path, files):
    """health_check on at the top level applies to every pool: the backend
    pool's backend is checked (and seen up), the pool of files has nothing
    to check (no health-check line for it) and rsp keeps serving."""
    backend = make_backend("a")
    health = 'health_check = { path = "/", interval = 0.1, timeout = 1, rise = 1, fall = 1 }'
    proxy = start_files_proxy(start_proxy, tmp_path, pool_body(files, backend, health))
    wait_status(proxy, lambda doc: any(b["active_health"] == "up" for p in doc["pools"] for b in p["backends"]),
                "the backend passes its health checks")
    lines = [line for line in proxy.stderr().splitlines() if "health checks:" in line]
    assert len(lines) == 1 and "for 1 backend" in lines[0], lines
    assert served_by_each(proxy) == ["a"] * 4
    assert proxy.alive(), proxy.describe()


def test_reload_with_root_pools(make_backend, start_proxy, tmp_path, files):
    """Reloads open each root anew and free the old generation's (the
    teardown check finds no file descriptor left over); a pool that turns
    from backends to files and back reloads too."""
    backend = make_backend("a")
    proxy = start_files_proxy(start_proxy, tmp_path, pool_body(files, backend))
    sighup(proxy, 2)
    proxy.write(f'backends = {{ "{backend.host}:{backend.port}" }}\n'
                f'pools = {{ static = {{ backends = {{ "{backend.host}:{backend.port}" }} }} }}')
    sighup(proxy, 3)
    assert "root" not in {p["name"]: p for p in status_json(proxy)["pools"]}["static"]
    proxy.write(pool_body(files, backend))
    sighup(proxy, 4)
    assert {p["name"]: p for p in status_json(proxy)["pools"]}["static"]["root"] == files.www
    assert served_by_each(proxy) == ["a"] * 4


RELOAD_ERRORS = [
    ("root-missing", lambda f: f'pools = {{ static = {{ root = {lua_string(f.missing)} }} }}', "pools.static.root"),
    ("headers-refused", lambda f: 'headers = { Connection = "close" }', 'headers["Connection"]'),
    ("compress-typo", lambda f: "compress = { type = {} }", "compress"),
    ("error-page-too-big", lambda f: f"error_pages = {{ [404] = {lua_string(f.big)} }}", "error_pages[404]"),
]


@pytest.mark.parametrize("make, setting", [c[1:] for c in RELOAD_ERRORS], ids=[c[0] for c in RELOAD_ERRORS])
def test_broken_reload_keeps_old_config(make_backend, start_proxy, tmp_path, rsp, files, make, setting):
    """A SIGHUP with one of the new settings broken logs the line rsp -t
    gives, then "reload failed"; the old config goes on serving (its
    backend a, not b of the new file, and its pool of files in status).
    Fixed, the file reloads as generation 2."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_files_proxy(start_proxy, tmp_path, pool_body(files, a))
    path = proxy.write(f'backends = {{ "{b.host}:{b.port}" }}\n{make(files)}')
    error = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, setting, status=1)
    new_lines = sighup_failing(proxy)
    failed = min(i for i, line in enumerate(new_lines) if "reload failed" in line)
    assert any(error[len("rsp: "):] in line for line in new_lines[:failed]), \
        f"the config error {error!r} was not logged before 'reload failed': {new_lines}"
    assert served_by_each(proxy) == ["a"] * 4, "the old config no longer serves"
    assert {p["name"]: p for p in status_json(proxy)["pools"]}["static"]["root"] == files.www
    proxy.write(f'backends = {{ "{b.host}:{b.port}" }}')
    sighup(proxy, 2)
    assert served_by_each(proxy) == ["b"] * 4


@pytest.fixture
def world():
    """A 0755 directory of root's (removed after the test), for files user
    nobody may or may not use. Skips unless root."""
    nobody()
    directory = tempfile.mkdtemp(prefix="rsp-files-user-")
    try:
        os.chmod(directory, 0o755)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def user_config(directory, body):
    """A config (0644) in directory with user = "nobody" and body."""
    path = os.path.join(directory, "rsp.lua")
    with open(path, "w") as f:
        f.write(config_text(free_port(), f'user = "nobody"\n{body}'))
    os.chmod(path, 0o644)
    return path


def test_root_the_user_cannot_search(rsp, world):
    """A pool's root that only root may enter (0700): rsp as root could
    open it, nobody could serve nothing from it: refused by rsp -t and the
    start, naming the setting, the user and the directory; 0711 (searched,
    not listed) is enough."""
    www = os.path.join(world, "www")
    os.mkdir(www, 0o700)
    path = user_config(world, f'backends = {{ "127.0.0.1:9" }}\npools = {{ static = {{ root = {lua_string(www)} }} }}')
    line = assert_config_error(run_rsp(rsp, ["-t", path], world), path, "pools.static.root",
                               words=("user nobody", www, "Permission denied"), status=1)
    assert line == (f"rsp: {path}: setting 'pools.static.root': user nobody cannot reach the files in {www} "
                    f"(Permission denied)"), line
    started = run_rsp(rsp, [path], world)
    assert started.returncode == 1 and started.stderr.splitlines() == [line], started.stderr
    os.chmod(www, 0o711)
    ok = run_rsp(rsp, ["-t", path], world)
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr


def test_error_page_the_user_cannot_read(rsp, world):
    """An error page 0600, root's: read at the start, but every reload (as
    nobody) would fail: refused naming the first level that lists it
    (here the top level's error_pages[404]); the same file inherited by a
    site is checked once."""
    page = os.path.join(world, "404.html")
    with open(page, "w") as f:
        f.write("<h1>not here</h1>\n")
    os.chmod(page, 0o600)
    path = user_config(world, f'root = {lua_string(world)}\nerror_pages = {{ [404] = {lua_string(page)} }}\n'
                              f'sites = {{ ["example.org"] = {{ root = {lua_string(world)} }} }}')
    result = run_rsp(rsp, ["-t", path], world)
    line = assert_config_error(result, path, "error_pages[404]", words=("user nobody", page), status=1)
    assert line == f"rsp: {path}: setting 'error_pages[404]': user nobody cannot read {page} (Permission denied)"
    os.chmod(page, 0o644)
    ok = run_rsp(rsp, ["-t", path], world)
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
