"""allow / deny (stage 22, issue 31): lists of addresses and CIDR prefixes
at the top level, per named pool and per site; the longest matching prefix
decides, a tie goes to deny, and once `allow` is set a client no rule
matches is refused. A refused client gets rsp's own 403 (error_pages and
headers apply to it) and nothing reaches a backend. IPv4 clients are bound
to 127.0.0.2 and 127.0.0.3; IPv6 comes from ::1; an IPv4 client of a
dual-stack listener ([::]) is matched as IPv4."""

import pytest

from backends import KeepAliveBackend
from client import Conn
from files_util import write_tree
from netutil import free_port
from proxy import run_rsp

pytestmark = pytest.mark.stage(22)

SITE = "www.example.com"


@pytest.fixture
def app():
    backend = KeepAliveBackend("app")
    yield backend
    backend.stop()


def status_from(proxy, source, host=SITE, address="127.0.0.1", target="/"):
    """The status of GET target from a client bound to source."""
    with Conn(proxy.port, host=host, address=address, source=source) as c:
        return c.request("GET", target).status


def test_deny_one_address(start_proxy, app):
    """deny = { "127.0.0.2" }: 127.0.0.2 gets 403 and nothing reaches the
    backend; 127.0.0.3 goes through."""
    proxy = start_proxy(app, deny=["127.0.0.2"])
    assert status_from(proxy, "127.0.0.2") == 403
    assert app.requests == 0, "a denied request reached the backend"
    assert status_from(proxy, "127.0.0.3") == 200
    assert app.requests == 1


def test_allow_refuses_everyone_else(start_proxy, app):
    """allow = { "127.0.0.3/32" }: only that address gets in."""
    proxy = start_proxy(app, allow=["127.0.0.3/32"])
    assert status_from(proxy, "127.0.0.2") == 403
    assert status_from(proxy, "127.0.0.3") == 200
    assert app.requests == 1


def test_longest_prefix_wins_and_tie_denies(start_proxy, app):
    """allow 127.0.0.0/8 with deny 127.0.0.2: the /32 wins for .2; .3 is
    in by the /8. A tie (allow and deny of 127.0.0.3/32) denies."""
    proxy = start_proxy(app, allow=["127.0.0.0/8"], deny=["127.0.0.2", "10.0.0.0/8"])
    assert status_from(proxy, "127.0.0.2") == 403
    assert status_from(proxy, "127.0.0.3") == 200
    tie = start_proxy(app, allow=["127.0.0.3/32"], deny=["127.0.0.3/32"])
    assert status_from(tie, "127.0.0.3") == 403


def test_deny_all_allow_some(start_proxy, app):
    """deny "all" with a narrower allow: the allow wins for its prefix."""
    proxy = start_proxy(app, deny=["all"], allow=["127.0.0.2/31"])
    assert status_from(proxy, "127.0.0.3") == 200  # 127.0.0.2/31 holds .2 and .3
    assert status_from(proxy, "127.0.0.4") == 403


def test_per_site_over_pool_over_top(start_proxy, app):
    """The site's list, else its pool's, else the top level's."""
    proxy = start_proxy(app, deny=["127.0.0.3"],
                        pools={"p": {"backends": [app], "deny": ["127.0.0.2"]}},
                        sites={SITE: {"backends": [app], "allow": ["127.0.0.2"]},
                               "pool.example.com": {"pool": "p"},
                               "plain.example.com": [app]})
    assert status_from(proxy, "127.0.0.2", host=SITE) == 200
    assert status_from(proxy, "127.0.0.3", host=SITE) == 403
    assert status_from(proxy, "127.0.0.2", host="pool.example.com") == 403
    assert status_from(proxy, "127.0.0.3", host="pool.example.com") == 200
    assert status_from(proxy, "127.0.0.2", host="plain.example.com") == 200
    assert status_from(proxy, "127.0.0.3", host="plain.example.com") == 403


def test_ipv6_client(start_proxy, app):
    """On a [::1] listener: ::1 matches "::1/128" and "::/0" rules."""
    port = free_port()
    proxy = start_proxy(app, port=port, listen=f"[::1]:{port}", deny=["::1"])
    with Conn(port, host=SITE, address="::1") as c:
        assert c.request("GET", "/").status == 403
    assert app.requests == 0


def test_ipv6_prefix_allow(start_proxy, app):
    port = free_port()
    proxy = start_proxy(app, port=port, listen=f"[::1]:{port}", allow=["::1/128"], deny=["::/0"])
    with Conn(port, host=SITE, address="::1") as c:
        assert c.request("GET", "/").status == 200
    assert app.requests == 1


def test_ipv4_mapped_client_matched_as_ipv4(start_proxy, app):
    """A dual-stack listener ([::]) sees 127.0.0.2 as ::ffff:127.0.0.2:
    the IPv4 rule still matches it."""
    port = free_port()
    proxy = start_proxy(app, port=port, listen=f"[::]:{port}", deny=["127.0.0.2"])
    assert status_from(proxy, "127.0.0.2") == 403
    assert status_from(proxy, "127.0.0.3") == 200


def test_refusal_gets_error_page_and_headers(start_proxy, app, tmp_path):
    """The 403 is rsp's own answer: error_pages and headers apply."""
    page = write_tree(tmp_path / "e", {"403.html": b"<p>not for you</p>\n"}) / "403.html"
    proxy = start_proxy(app, deny=["all"], error_pages={403: str(page)}, headers={"X-Site": "mine"})
    with Conn(proxy.port, host=SITE, source="127.0.0.2") as c:
        r = c.request("GET", "/")
    assert r.status == 403 and r.body == b"<p>not for you</p>\n", r
    assert r.header("X-Site") == "mine", r.headers


def test_files_are_protected_too(start_proxy, tmp_path):
    www = write_tree(tmp_path / "www", {"f.txt": b"secret\n"})
    proxy = start_proxy(root=str(www), deny=["127.0.0.2"])
    with Conn(proxy.port, source="127.0.0.2") as c:
        assert c.request("GET", "/f.txt").status == 403


def check(rsp, tmp_path, line):
    """rsp -t on a config of a backend and `line`: (exit status, stderr)."""
    path = tmp_path / "access.lua"
    path.write_text('listen = 18080\nbackends = { "127.0.0.1:8001" }\n' + line + "\n")
    result = run_rsp(rsp, ["-t", str(path)], tmp_path)
    return result.returncode, result.stderr


@pytest.mark.parametrize("line, message", [
    ('deny = { "10.0.0.0/33" }', "setting 'deny'[1] must be \"all\", an address or a CIDR prefix"),
    ('deny = { "10.0.0.1/" }', "setting 'deny'[1] must be \"all\", an address or a CIDR prefix"),
    ('allow = { "all", "2001:db8::/129" }', "setting 'allow'[2] must be \"all\", an address or a CIDR prefix"),
    ('deny = { "everyone" }', "setting 'deny'[1] must be \"all\", an address or a CIDR prefix"),
    ('deny = "10.0.0.0/8"', "setting 'deny' must be a list"),
    ('deny = {}', "setting 'deny' is an empty list"),
    ('sites = { ["a.example"] = { backends = { "127.0.0.1:8001" }, allow = { "300.1.1.1" } } }',
     "setting 'sites[\"a.example\"].allow'[1] must be"),
    ('pools = { p = { backends = { "127.0.0.1:8001" }, deny = { 5 } } }', "setting 'pools.p.deny'[1] must be"),
])
def test_bad_rules_refused(rsp, tmp_path, line, message):
    status, stderr = check(rsp, tmp_path, line)
    assert status != 0 and message in stderr, stderr


def test_good_rules_accepted(rsp, tmp_path):
    status, stderr = check(rsp, tmp_path, 'allow = { "10.0.0.0/8", "2001:db8::/32", "192.168.1.7" }\n'
                                          'deny = { "10.1.2.3", "all" }')
    assert status == 0, stderr
