"""The stage 06 settings: sites (virtual hosts, each with its own pool and
balance), an optional default site (`backends`), and the request-head
limits max_request_line and max_request_head. Every mistake is refused
at startup with exit status 1 and one line naming the file and the
setting; valid files start a proxy that routes as configured.
(The stage 05 settings are tested in test_config.py, routing rules in
test_http.py.)"""


import pytest

from checks import assert_config_error, served_by
from client import HeldRequest, get
from netutil import LOOPBACK, free_port
from proxy import lua_config, lua_value, run_rsp, stage6_settings, streamed



def settings(**changes):
    """A valid stage 06 config (a default site and one site) with some
    settings changed (name = Lua source text of the value; None removes
    the setting)."""
    values = stage6_settings(free_port(), [(LOOPBACK, free_port())])
    values["sites"] = sites(("www.example.com", SITE))
    return lua_config(values, changes)


SITE = '{ backends = { "127.0.0.1:8001" } }'


def sites(*entries):
    """Lua text of a sites table from (key, Lua text of the value) pairs;
    a str key is quoted, anything else (Lua text) is used as it is."""
    keys = [lua_value(k) if isinstance(k, str) else k[0] for k, _ in entries]
    return "{ " + ", ".join(f"[{k}] = {v}" for k, (_, v) in zip(keys, entries)) + " }"


def raw(text):
    """A sites key given as Lua text rather than as a string."""
    return (text,)


WWW = 'sites["www.example.com"]'

# (id, config text, setting the message must name, in quotes)
CONFIG_ERRORS = [
    ("sites-string", settings(sites='"www.example.com"'), "sites"),
    ("sites-number", settings(sites="80"), "sites"),
    ("sites-key-number", settings(sites=f"{{ {SITE} }}"), "sites"),
    ("sites-key-boolean", settings(sites=sites((raw("true"), SITE))), "sites"),
    ("sites-key-table", settings(sites=sites((raw("{}"), SITE))), "sites"),
    ("host-with-space", settings(sites=sites(("a b", SITE))), "sites"),
    ("host-star", settings(sites=sites(("*", SITE))), "sites"),
    ("host-empty", settings(sites=sites(("", SITE))), "sites"),
    ("host-star-dot", settings(sites=sites(("*.", SITE))), "sites"),
    ("host-dot", settings(sites=sites((".", SITE))), "sites"),
    ("host-dots", settings(sites=sites(("..", SITE))), "sites"),
    ("host-empty-label", settings(sites=sites(("a..example.com", SITE))), "sites"),
    ("host-leading-dot", settings(sites=sites((".example.com", SITE))), "sites"),
    ("host-double-star", settings(sites=sites(("**.example.com", SITE))), "sites"),
    ("host-star-inside", settings(sites=sites(("*.*.example.com", SITE))), "sites"),
    ("host-star-label", settings(sites=sites(("www.*.com", SITE))), "sites"),
    ("host-with-port", settings(sites=sites(("www.example.com:8080", SITE))), "sites"),
    ("host-with-slash", settings(sites=sites(("example.com/blog", SITE))), "sites"),
    ("host-zero-byte", settings(sites=sites((raw('"www.example.com\\0"'), SITE))), "sites"),
    ("site-string", settings(sites=sites(("www.example.com", '"127.0.0.1:8001"'))), WWW),
    ("site-without-backends", settings(sites=sites(("www.example.com", '{ balance = "least_conn" }'))),
     f"{WWW}.backends"),
    ("site-list-without-key", settings(sites=sites(("www.example.com", '{ "127.0.0.1:8001" }'))),
     f"{WWW}.backends"),
    ("site-backends-empty", settings(sites=sites(("www.example.com", "{ backends = {} }"))), f"{WWW}.backends"),
    ("site-backends-string", settings(sites=sites(("www.example.com", '{ backends = "127.0.0.1:8001" }'))),
     f"{WWW}.backends"),
    ("site-backends-no-port", settings(sites=sites(("www.example.com", '{ backends = { "127.0.0.1" } }'))),
     f"{WWW}.backends"),
    ("site-backends-listed-twice",
     settings(sites=sites(("www.example.com", '{ backends = { "127.0.0.1:8001", "127.0.0.1:8001" } }'))),
     f"{WWW}.backends"),
    ("site-balance-unknown",
     settings(sites=sites(("www.example.com", '{ backends = { "127.0.0.1:8001" }, balance = "random" }'))),
     f"{WWW}.balance"),
    ("site-balance-number",
     settings(sites=sites(("www.example.com", '{ backends = { "127.0.0.1:8001" }, balance = 1 }'))),
     f"{WWW}.balance"),
    ("same-site-twice-case", settings(sites=sites(("WWW.example.com", SITE), ("www.example.com", SITE))), "sites"),
    ("same-site-twice-dot", settings(sites=sites(("www.example.com.", SITE), ("www.example.com", SITE))), "sites"),
    ("same-wildcard-twice", settings(sites=sites(("*.Example.com", SITE), ("*.example.com", SITE))), "sites"),
    ("neither-backends-nor-sites", settings(backends=None, sites=None), "backends"),
    ("no-backends-and-sites-empty", settings(backends=None, sites="{}"), "backends"),
    ("max_request_line-255", settings(max_request_line="255"), "max_request_line"),
    ("max_request_line-0", settings(max_request_line="0"), "max_request_line"),
    ("max_request_line-negative", settings(max_request_line="-8192"), "max_request_line"),
    ("max_request_line-too-large", settings(max_request_line="1048577"), "max_request_line"),
    ("max_request_line-string", settings(max_request_line='"8192"'), "max_request_line"),
    ("max_request_line-fraction", settings(max_request_line="8192.5"), "max_request_line"),
    ("max_request_line-nan", settings(max_request_line="0/0"), "max_request_line"),
    ("max_request_line-infinite", settings(max_request_line="1/0"), "max_request_line"),
    ("max_request_head-255", settings(max_request_head="255"), "max_request_head"),
    ("max_request_head-too-large", settings(max_request_head="1048577"), "max_request_head"),
    ("max_request_head-table", settings(max_request_head="{}"), "max_request_head"),
    ("max_request_head-fraction", settings(max_request_head="32768.25"), "max_request_head"),
    ("max_request_head-below-line", settings(max_request_line="8192", max_request_head="8191"),
     "max_request_head"),
    ("max_request_head-below-default-line", settings(max_request_head="4096"), "max_request_head"),
    ("max_request_line-above-default-head", settings(max_request_line="65536"), "max_request_head"),
]


@pytest.mark.stage(6)
@pytest.mark.parametrize("text, setting", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_bad_sites_config(rsp, tmp_path, text, setting):
    """A config rsp cannot use makes it exit with status 1 and exactly one
    line on stderr, starting with "rsp: ", naming the file and the
    setting, in quotes."""
    path = tmp_path / "site.lua"
    path.write_text(text)
    assert_config_error(run_rsp(rsp, [str(path)], tmp_path), path, setting)


# -- valid configs ---------------------------------------------------------------

def ask(port, host, path="/echo"):
    """A GET with this Host; returns the Response."""
    return get(port, path, host=host)


@pytest.mark.stage(6)
def test_sites_without_default_site(make_backend, start_proxy):
    """A config with sites and no `backends` starts: each site is served
    (two sites may share a backend), any other host gets 421."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(sites={"www.example.com": [a], "blog.example.com": [a], "*.example.org": [b]})
    assert [served_by(ask(proxy.port, h)) for h in ("www.example.com", "blog.example.com", "x.example.org")] == \
        ["a", "a", "b"]
    assert ask(proxy.port, "example.net").status == 421
    assert a.total_hits == 2 and b.total_hits == 1


@pytest.mark.stage(6)
def test_site_names_case_and_trailing_dot(make_backend, start_proxy):
    """Site names in the config may be in any case and end in a dot; an
    exact name and a wildcard for the same domain are two sites."""
    a, b, c = make_backend("a"), make_backend("b"), make_backend("c")
    proxy = start_proxy(sites={"WWW.Example.COM.": [a], "*.Example.Org": [b], "example.org": [c]})
    assert served_by(ask(proxy.port, "www.example.com")) == "a"
    assert served_by(ask(proxy.port, "x.EXAMPLE.org")) == "b"
    assert served_by(ask(proxy.port, "example.org")) == "c"


@pytest.mark.stage(6)
def test_each_site_balances_its_own_pool(make_backend, start_proxy):
    """Each site rotates over its own backends, independently of the
    others and of the default site, with its own balance setting."""
    backends = {n: make_backend(n) for n in "abcdef"}
    proxy = start_proxy(backends["e"], backends["f"], sites={
        "rr.example.com": {"backends": [backends["a"], backends["b"]], "balance": "round_robin"},
        "lc.example.com": {"backends": [backends["c"], backends["d"]], "balance": "least_conn"},
    })
    seen = {"rr.example.com": [], "lc.example.com": [], "other.example.com": []}
    for _ in range(4):
        for host in seen:
            seen[host].append(served_by(ask(proxy.port, host)))
    for host, pair in zip(seen, ("ab", "cd", "ef")):
        assert seen[host] in ([pair[0], pair[1]] * 2, [pair[1], pair[0]] * 2), f"{host}: {seen[host]}"


@pytest.mark.stage(6)
def test_site_least_conn_avoids_busy_backend(make_backend, start_proxy, stage):
    """A site with balance = "least_conn": while one of its two backends
    holds an unfinished request, new requests for the site go to the
    other one; the held request then completes. (From stage 17 with
    request_buffering = false: a body still on its way holds no backend
    otherwise.)"""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(sites={"lc.example.com": {"backends": [a, b], "balance": "least_conn"}},
                        **streamed(stage))
    held = HeldRequest(proxy.port, host="lc.example.com")
    try:
        seen = [served_by(ask(proxy.port, "lc.example.com")) for _ in range(4)]
        busy = served_by(held.finish())
    finally:
        held.sock.close()
    assert busy not in seen and len(set(seen)) == 1, f"busy: {busy}, others went to {seen}"


@pytest.mark.stage(6)
@pytest.mark.parametrize("line, head", [(256, 256), (1048576, 1048576)], ids=["smallest", "largest"])
def test_limit_settings_accepted(make_backend, start_proxy, line, head):
    """The smallest and the largest limits are accepted: with 256 a short
    request is served; with 1 MiB a 60 kB header line is."""
    backend = make_backend("a")
    proxy = start_proxy(backend, max_request_line=line, max_request_head=head)
    path = "/echo" if line == 256 else "/echo?" + "q" * 60000
    r = ask(proxy.port, "www.example.com", path)
    assert served_by(r) == "a"
    assert r.json()["path"] == path
