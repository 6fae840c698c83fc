"""balance = "hash" (stage 23): rendezvous hashing on hash_key ("client",
"path", "header:NAME", "cookie:NAME") over four real backends.

A key always lands on the same backend; the keys spread over all four; a
backend that goes down (by its health check, or a refused connect) moves
exactly its own keys, to the backend of the next-highest score, and they
come back when it does; two workers and a reload pick alike; the config
errors name the setting; status.json and the status page show the rule.

Who answered is read from the X-Backend header each test backend puts in
its answers; waiting is a bounded poll on the log or status.json."""

import collections
from concurrent.futures import ThreadPoolExecutor

import pytest

import netutil
from checks import assert_config_error, wait_for_log
from client import Conn, get
from proxy import backend_address, proxy_arguments, run_rsp
from test_status import (CHECK, HEALTH_TIMEOUT, ask_status, config_path, name_of, pools_by_name,
                         reload_and_wait, rewrite_config, start_with_status, status_json)
from test_workers import owners, started_workers

try:  # the HTTP/2 test needs python3-h2 and python3-trustme, as test_http2.py does
    from test_http2 import ca, cert, ctx, h2, start_h2  # noqa: F401 (fixtures)
    HAVE_H2 = True
except pytest.skip.Exception:
    HAVE_H2 = False

pytestmark = pytest.mark.stage(23)

KEYS = [f"user-{n}" for n in range(1000)]
PARALLEL = 8  # client threads asking at once (the backends are threaded)


# -- helpers ---------------------------------------------------------------------

def who(r):
    """Which test backend answered r (its X-Backend header): a 200 or a
    404 (a path it has no route for) from a backend, nothing else."""
    assert r.status in (200, 404) and r.header("X-Backend"), \
        f"expected an answer from a test backend, got {r!r}: {r.raw[:300]!r}"
    return r.header("X-Backend")


def by_header(proxy, keys, name="X-User"):
    """{key: the backend that answered GET /echo with header `name: key`}."""
    def ask(key):
        return who(get(proxy.port, "/echo", headers=[(name, key)]))
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return dict(zip(keys, pool.map(ask, keys)))


def stable_mapping(proxy, keys, ask=by_header):
    """Asks every key twice: the same backend both times. Returns the mapping."""
    first, second = ask(proxy, keys), ask(proxy, keys)
    differ = [k for k in keys if first[k] != second[k]]
    assert not differ, f"{len(differ)} keys changed backend between two asks, e.g. " \
                       f"{[(k, first[k], second[k]) for k in differ[:5]]}"
    return first


def assert_spread(mapping, names):
    """Every backend got at least 10% of the keys."""
    counts = collections.Counter(mapping.values())
    assert set(counts) <= set(names), counts
    for name in names:
        assert counts[name] >= len(mapping) // 10, f"backend {name} got {counts[name]} of {len(mapping)} keys: {counts}"


def assert_only_moved(before, after, gone):
    """The keys backend `gone` had moved to others; every other key stayed."""
    moved = {k for k in before if before[k] != after[k]}
    had = {k for k in before if before[k] == gone}
    assert had, f"backend {gone} had no keys"
    assert moved == had, f"{len(moved - had)} keys of other backends moved " \
                         f"(e.g. {sorted(moved - had)[:5]}); {len(had - moved)} of {gone} stayed"
    assert all(after[k] != gone for k in after), f"backend {gone} still answers while down"


@pytest.fixture
def four(make_backend):
    return [make_backend(name) for name in "abcd"]


# -- the mapping ---------------------------------------------------------------------

def test_header_key_same_backend_and_spread(four, start_proxy):
    """hash_key = "header:X-User": each of 1,000 keys lands on the same
    backend when asked twice, and every backend gets at least 10% of them;
    a request without the header is hashed by its client address (always
    127.0.0.1 here: one backend)."""
    proxy = start_proxy(*four, balance="hash", hash_key="header:X-User")
    mapping = stable_mapping(proxy, KEYS)
    assert_spread(mapping, "abcd")
    assert len({who(get(proxy.port, "/echo")) for _ in range(20)}) == 1


def test_header_name_ignores_case(four, start_proxy):
    """The header's name compares ignoring case: x-user and X-USER are the
    same key as hash_key's X-User."""
    proxy = start_proxy(*four, balance="hash", hash_key="header:X-User")
    keys = KEYS[:200]
    lower = by_header(proxy, keys, "x-user")
    assert_spread(lower, "abcd")  # the header was the key: not one client address for all
    assert lower == by_header(proxy, keys, "X-USER")


def test_client_key_by_source_address(four, start_proxy):
    """hash_key = "client" (the default with balance = "hash"): 100 source
    addresses 127.0.0.2 ... each keep their backend, and all four share them."""
    proxy = start_proxy(*four, balance="hash")
    sources = [f"127.0.0.{n}" for n in range(2, 102)]

    def ask(_, keys):
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            return dict(zip(keys, pool.map(lambda s: who(get(proxy.port, "/echo", source=s)), keys)))
    assert_spread(stable_mapping(proxy, sources, ask), "abcd")


def test_client_key_is_the_trusted_proxies_client(four, start_proxy):
    """With trusted_proxies naming 127.0.0.1, "client" is the address
    X-Forwarded-For gives (exchange_client), not the TCP peer: 200 such
    clients from one peer spread over all four, each keeping its backend."""
    proxy = start_proxy(*four, balance="hash", trusted_proxies=["127.0.0.1"])
    clients = [f"10.0.{n // 250}.{n % 250 + 1}" for n in range(200)]
    mapping = stable_mapping(proxy, clients, lambda p, keys: by_header(p, keys, "X-Forwarded-For"))
    assert_spread(mapping, "abcd")


def test_path_key_ignores_query_and_spelling(four, start_proxy):
    """hash_key = "path": the normalized path without the query: /p/N?q=1,
    /p/N?q=2 and /p/./N go to one backend; 300 paths spread over all four."""
    proxy = start_proxy(*four, balance="hash", hash_key="path")
    paths = [f"/p/{n}" for n in range(300)]

    def ask(targets):
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            return list(pool.map(lambda t: who(get(proxy.port, t)), targets))
    plain = ask(paths)
    assert_spread(dict(zip(paths, plain)), "abcd")
    assert ask([f"{p}?q=1" for p in paths]) == plain
    assert ask([f"{p}?q=2&r" for p in paths]) == plain
    assert ask([p.replace("/p/", "/p/./") for p in paths]) == plain


def test_cookie_key(four, start_proxy):
    """hash_key = "cookie:sid": the sid cookie's value, wherever it is among
    the cookies and across Cookie headers; a request without it is hashed
    by its client address."""
    proxy = start_proxy(*four, balance="hash", hash_key="cookie:sid")
    keys = KEYS[:300]

    def ask(cookie_headers):
        def one(key):
            return who(get(proxy.port, "/echo", headers=[("Cookie", c.format(key)) for c in cookie_headers]))
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            return dict(zip(keys, pool.map(one, keys)))
    alone = ask(["sid={}"])
    assert_spread(alone, "abcd")
    assert ask(["a=1; sid={}; b=2"]) == alone
    assert ask(["theme=dark", "xsid=0; sid={}"]) == alone
    without = {who(get(proxy.port, "/echo", headers=[("Cookie", "other=1")])) for _ in range(20)}
    assert without == {who(get(proxy.port, "/echo"))}, without


@pytest.mark.skipif(not HAVE_H2, reason="python3-h2 or python3-trustme is not installed")
def test_http2_streams_hash_alike(four, start_proxy, cert, ctx):
    """Over HTTP/2 (a stream's head is the HTTP/1.1 one it stands for):
    the sid cookie sent as separate cookie fields (as HTTP/2 clients split
    them) picks the backend an HTTP/1.1 request with one Cookie header
    gets, for 100 keys on one connection."""
    proxy = start_h2(start_proxy, *four, cert=cert, balance="hash", hash_key="cookie:sid")
    keys = KEYS[:100]
    plain = {k: who(get(proxy.port, "/echo", headers=[("Cookie", f"a=1; sid={k}")])) for k in keys}
    with h2(proxy, ctx) as c:
        for k in keys:
            st = c.get("/echo", headers=[("cookie", "a=1"), ("cookie", f"sid={k}")])
            assert st.status == 200, st
            assert st.header("x-backend") == plain[k], f"key {k}: HTTP/2 {st.header('x-backend')}, " \
                                                       f"HTTP/1.1 {plain[k]}"


# -- backends going down and coming back ---------------------------------------------------------------------

def test_down_by_health_check_moves_only_its_keys(four, start_proxy):
    """Backend c fails its health checks: exactly the keys it had move (to
    the others), every other key stays; once it passes again they return."""
    proxy = start_proxy(*four, balance="hash", hash_key="header:X-User", health_check=CHECK)
    c = four[2]
    before = stable_mapping(proxy, KEYS)
    c.health_status = 503
    wait_for_log(proxy, f"backend {name_of(c)} is down: health check", HEALTH_TIMEOUT)
    during = stable_mapping(proxy, KEYS)
    assert_only_moved(before, during, "c")
    c.health_status = 200
    wait_for_log(proxy, f"backend {name_of(c)} is up: health check", HEALTH_TIMEOUT)
    assert stable_mapping(proxy, KEYS) == before


def test_refused_connect_retries_the_next_highest_score(four, start_proxy, make_backend):
    """Backend b stopped: its keys' first requests find the connect
    refused and go on to another backend, later ones skip b (passive
    health); both are the backend of the next-highest score, so each key
    still answers from one backend, and only b's keys moved. The same key
    set moves as when active checks take b down in another proxy over the
    same backends. b back on its port (down_time 0.1 s): its keys return."""
    watched = start_proxy(*four, balance="hash", hash_key="header:X-User", health_check=CHECK)
    proxy = start_proxy(*four, balance="hash", hash_key="header:X-User", down_time=0.1)
    b = four[1]
    before = stable_mapping(proxy, KEYS)
    assert by_header(watched, KEYS) == before, "two proxies over the same backends disagree"
    port = backend_address(b)[1]
    b.stop()
    after = stable_mapping(proxy, KEYS)
    assert_only_moved(before, after, "b")
    wait_for_log(proxy, f"backend {name_of(b)} is down (", HEALTH_TIMEOUT)
    wait_for_log(watched, f"backend {name_of(b)} is down: health check", HEALTH_TIMEOUT)
    assert by_header(watched, KEYS) == after, "a retry did not go to the next-highest score"
    make_backend("b", port=port)
    wait_for_log(watched, f"backend {name_of(b)} is up: health check", HEALTH_TIMEOUT)
    assert by_header(watched, KEYS) == before
    # The refused proxy retries b once down_time is over: a key of b's
    # finds it up again, and from then on all of them do.
    key = next(k for k in KEYS if before[k] == "b")
    netutil.wait_for(lambda: who(get(proxy.port, "/echo", headers=[("X-User", key)])) == "b",
                     f"key {key} back on b", HEALTH_TIMEOUT, pause=0.05)
    assert stable_mapping(proxy, KEYS) == before


# -- processes and reloads ---------------------------------------------------------------------

def test_two_workers_agree(four, start_proxy):
    """workers = 2: keep-alive connections held until both workers have
    some; 300 keys asked on a connection of each worker get the same
    backend from both."""
    proxy = start_proxy(*four, balance="hash", hash_key="header:X-User", workers=2)
    pids = started_workers(proxy, 2)
    held, by_worker = [], {}
    try:
        for _ in range(64):
            conn = Conn(proxy.port)
            held.append(conn)
            assert conn.get("/echo").status == 200
            (pid,) = owners(conn.sock, proxy.port, pids)
            by_worker.setdefault(pid, conn)
            if len(by_worker) == 2:
                break
        assert len(by_worker) == 2, f"64 connections all went to one worker: {list(by_worker)}"
        seen = {}
        for pid, conn in by_worker.items():
            seen[pid] = {k: who(conn.get("/echo", headers=[("X-User", k)])) for k in KEYS[:300]}
        first, second = seen.values()
        assert first == second, f"the workers disagree on {sum(first[k] != second[k] for k in first)} keys"
        assert_spread(first, "abcd")
    finally:
        for conn in held:
            conn.close()


def test_reload_keeps_the_mapping(four, start_proxy, rsp, tmp_path):
    """A reload with the backends listed in another order (the score is of
    the backend's name, not its place) keeps every key on its backend."""
    proxy = start_with_status(start_proxy, *four, balance="hash", hash_key="header:X-User")
    before = stable_mapping(proxy, KEYS)
    rewrite_config(rsp, proxy, tmp_path, list(reversed(four)), balance="hash", hash_key="header:X-User")
    reload_and_wait(proxy, f"reloaded {config_path(proxy)}: generation 2")
    assert stable_mapping(proxy, KEYS) == before


# -- status ---------------------------------------------------------------------

def test_status_shows_hash_and_key(four, start_proxy):
    """status.json: pools[].balance "hash" and pools[].hash_key as
    configured (the default "client" too); a round_robin pool has no
    hash_key. The status page names the rule and its key."""
    a, b, c, d = four
    proxy = start_with_status(start_proxy, a, b, balance="hash", hash_key="header:X-User",
                              pools={"app": {"backends": [c], "balance": "hash"},
                                     "cart": {"backends": [d], "balance": "hash", "hash_key": "cookie:sid"},
                                     "plain": [a]},
                              sites={"app.test": {"pool": "app"}, "cart.test": {"pool": "cart"},
                                     "plain.test": {"pool": "plain"}})
    pools = pools_by_name(status_json(proxy))
    assert (pools["default"]["balance"], pools["default"]["hash_key"]) == ("hash", "header:X-User"), pools
    assert (pools["app"]["balance"], pools["app"]["hash_key"]) == ("hash", "client"), pools
    assert (pools["cart"]["balance"], pools["cart"]["hash_key"]) == ("hash", "cookie:sid"), pools
    assert pools["plain"]["balance"] == "round_robin" and "hash_key" not in pools["plain"], pools
    page = ask_status(proxy.status_port, "/").body.decode()
    assert "hash on header:X-User" in page and "hash on cookie:sid" in page, page[:3000]


# -- config errors ---------------------------------------------------------------------

HASH_KEY_FORMS = '"client", "path", "header:NAME" or "cookie:NAME"'
ERRORS = [
    ("bad-balance", dict(balance="x"),
     "balance", 'must be "round_robin", "least_conn" or "hash", not "x"'),
    ("balance-not-string", dict(balance=5),
     "balance", 'must be "round_robin", "least_conn" or "hash", not a number'),
    ("hash-key-without-hash", dict(hash_key="path"),
     "hash_key", "needs 'balance' = \"hash\" (it is \"round_robin\")"),
    ("hash-key-with-least-conn", dict(balance="least_conn", hash_key="client"),
     "hash_key", "needs 'balance' = \"hash\" (it is \"least_conn\")"),
    ("unknown-form", dict(balance="hash", hash_key="ip"),
     "hash_key", f'must be {HASH_KEY_FORMS}'),
    ("empty-header", dict(balance="hash", hash_key="header:"),
     "hash_key", 'not "header:"'),
    ("bad-header-name", dict(balance="hash", hash_key="header:X User"),
     "hash_key", 'not "header:X User"'),
    ("empty-cookie", dict(balance="hash", hash_key="cookie:"),
     "hash_key", 'not "cookie:"'),
    ("hash-key-not-string", dict(balance="hash", hash_key=True),
     "hash_key", "not a boolean"),
    ("pool-hash-key-without-hash", dict(pools={"app": {"backends": [("127.0.0.1", 9)], "hash_key": "path"}},
                                        sites={"app.test": {"pool": "app"}}),
     "pools.app.hash_key", "needs 'pools.app.balance' = \"hash\""),
    ("site-unknown-form", dict(sites={"s.test": {"backends": [("127.0.0.1", 9)], "balance": "hash",
                                                 "hash_key": "Header:X"}}),
     'sites["s.test"].hash_key', 'not "Header:X"'),
    ("site-pool-and-hash-key", dict(pools={"app": {"backends": [("127.0.0.1", 9)], "balance": "hash"}},
                                    sites={"s.test": {"pool": "app", "hash_key": "path"}}),
     'sites["s.test"]', "names a pool and its own hash_key (set it on the pool): choose one"),
]


@pytest.mark.parametrize("options,setting,words", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_config_errors(rsp, tmp_path, options, setting, words):
    """Each bad balance or hash_key is refused with one line naming the
    setting and saying what it must be."""
    (path,) = proxy_arguments(rsp.stage, 1, [("127.0.0.1", 9)], str(tmp_path), options)
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, setting, words=(words,))


@pytest.mark.parametrize("setting", ["balance", "hash_key"])
def test_top_level_balance_needs_top_level_backends(rsp, tmp_path, setting):
    """A top-level balance or hash_key applies to the top-level backends
    alone: with none, it would be ignored though it reads as if it were
    the sites' rule. Refused, naming it."""
    value = "hash" if setting == "balance" else "path"
    options = {"sites": {"s.test": {"backends": [("127.0.0.1", 9)]}}, setting: value}
    (path,) = proxy_arguments(rsp.stage, 1, [], str(tmp_path), options)
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, setting,
                        words=("applies to the top-level 'backends', and there are none",))
