"""The stage 06 settings: sites (virtual hosts, each with its own pool and
balance), an optional default site (`backends`), and the request-head
limits max_request_line and max_request_head. Every mistake is refused
at startup with exit status 1 and one line naming the file and the
setting; valid files start a proxy that routes as configured. From stage
19 a site may have `aliases`, more names it answers for (tested at the
end; before stage 19 the field is refused as unknown, from stage 07 on).
(The stage 05 settings are tested in test_config.py, routing rules in
test_http.py.)"""


import pytest

from checks import assert_config_error, served_by
from client import HeldRequest, get
from netutil import LOOPBACK, free_port
from promparse import value
from proxy import lua_config, lua_value, run_rsp, stage6_settings, streamed
from test_status import metrics, pools_by_name, sites_by_name, start_with_status, wait_status



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


# -- aliases (stage 19) ----------------------------------------------------------

@pytest.mark.stage(19)
def test_aliases_reach_the_site_and_count_under_its_name(make_backend, start_proxy):
    """example.org with aliases www.example.org and *.example.net: a
    request for any of them (any case, a trailing dot, one or two labels
    under the wildcard) reaches example.org's backend, and the exact
    alias wins over the wildcard site *.example.org; example.net itself is
    no alias (421). status.json and /metrics show example.org once, its
    counter holding the requests of every name, and one pool named after
    it; no alias appears as a site or a pool."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_with_status(start_proxy, sites={
        "example.org": {"backends": [a], "aliases": ["www.example.org", "*.example.net"]},
        "*.example.org": [b]})
    hosts = ["example.org", "www.example.org", "WWW.Example.ORG.", "x.example.net", "a.b.example.net"]
    got = [(h, served_by(ask(proxy.port, h))) for h in hosts]
    assert got == [(h, "a") for h in hosts], f"(Host, backend): {got}"
    assert served_by(ask(proxy.port, "blog.example.org")) == "b"
    assert ask(proxy.port, "example.net").status == 421
    assert (a.total_hits, b.total_hits) == (5, 1)
    doc = wait_status(proxy, lambda d: d["requests_total"] >= 7 and d["requests_in_flight"] == 0,
                      "the 7 requests counted")
    assert doc["requests_total"] == 7, doc["requests_total"]
    sites = sites_by_name(doc)
    assert set(sites) == {"example.org", "*.example.org", "-"}, list(sites)
    assert sites["example.org"]["codes"] == {"200": 5}, sites["example.org"]
    assert sites["*.example.org"]["codes"] == {"200": 1}, sites["*.example.org"]
    pools = pools_by_name(doc)
    assert set(pools) == {"example.org", "*.example.org"}, list(pools)
    assert value(metrics(proxy), "rsp_requests_total", site="example.org", code="200") == 5


def site_with(aliases):
    """Lua text of a site table with these aliases (Lua text)."""
    return f'{{ aliases = {aliases}, backends = {{ "127.0.0.1:8001" }} }}'


# (id, sites entries, the settings one of which the line must name, words it must hold).
# Where two names collide the order rsp reads the sites in decides which of the
# two is blamed: either is right, as long as the line names both.
ALIAS_ERRORS = [
    ("alias-is-another-site", [("a.example.org", site_with('{ "b.example.org" }')), ("b.example.org", SITE)],
     ['sites["a.example.org"].aliases[1]', "sites"], ["a.example.org", "b.example.org", "already"]),
    ("alias-of-two-sites", [("a.example.org", site_with('{ "www.example.org" }')),
                            ("b.example.org", site_with('{ "x.example.org", "WWW.example.org." }'))],
     ['sites["a.example.org"].aliases[1]', 'sites["b.example.org"].aliases[2]'],
     ["www.example.org", "a.example.org", "b.example.org", "already"]),
    ("alias-is-its-own-site", [("a.example.org", site_with('{ "A.example.org" }'))],
     ['sites["a.example.org"].aliases[1]'], ["a.example.org", "already"]),
    ("alias-twice-in-a-site", [("a.example.org", site_with('{ "*.example.net", "*.Example.net" }'))],
     ['sites["a.example.org"].aliases[2]'], ["*.example.net", "already"]),
    ("aliases-a-string", [("a.example.org", site_with('"www.example.org"'))],
     ['sites["a.example.org"].aliases'], ["list"]),
    ("aliases-with-keys", [("a.example.org", site_with('{ www = "www.example.org" }'))],
     ['sites["a.example.org"].aliases'], ["list"]),
    ("alias-a-number", [("a.example.org", site_with("{ 5 }"))], ['sites["a.example.org"].aliases[1]'],
     ["host name"]),
    ("alias-not-a-host-name", [("a.example.org", site_with('{ "www.example.org/x" }'))],
     ['sites["a.example.org"].aliases[1]'], ["www.example.org/x"]),
]


@pytest.mark.stage(19)
@pytest.mark.parametrize("entries, settings_named, words", [c[1:] for c in ALIAS_ERRORS],
                         ids=[c[0] for c in ALIAS_ERRORS])
def test_bad_aliases_refused(rsp, tmp_path, entries, settings_named, words):
    """A name given twice (as a site and an alias, as two aliases, as a
    site's own name) or an aliases field that is not a list of host names:
    exit status 1, one line naming the setting and both places."""
    path = tmp_path / "site.lua"
    path.write_text(settings(sites=sites(*entries)))
    line = assert_config_error(run_rsp(rsp, [str(path)], tmp_path), path, words=words)
    assert any(f"setting '{name}'" in line for name in settings_named), \
        f"the line names none of {settings_named}: {line}"


@pytest.mark.stage(7, 18)
def test_aliases_unknown_before_stage_19(rsp, tmp_path):
    """Before stage 19 a site has no `aliases`: the field is refused like
    any unknown one, naming the site and the field."""
    path = tmp_path / "site.lua"
    path.write_text(settings(sites=sites(("www.example.com", site_with('{ "example.com" }')))))
    assert_config_error(run_rsp(rsp, [str(path)], tmp_path), path, WWW, words=["'aliases'"])
