"""Active health checks (stage 08): health_check = { path, interval,
timeout, rise, fall } at the top level (every pool's and site's default),
a pool's or site's own (missing fields from the top level), or false.

rsp sends GET PATH to each checked backend every interval; a status of
500 or more, no answer within timeout, or a refused connection fails a
check; fall failures in a row mark the backend down, rise passes in a
row bring it back. A down backend gets no request; when every backend of
a pool is down, rsp answers 503 itself without connecting anywhere.

Checks run every 0.1 s here. The test backends count the checks they get
(their /healthz route, whose status a test sets), and outcomes are read
from those counts, the X-Backend header of answers and rsp's log, where
each transition is one line. Waiting is a bounded poll, never a
measurement."""

import time

import pytest

from backends import hold_after_head
from checks import (assert_config_error, assert_logged_once, assert_logged_times, assert_rsp_page, backend_name,
                    served_by, wait_for_log, went_down)
from client import get
import netutil
from netutil import LOOPBACK, closed_ports, free_port, release_port
from proxy import proxy_arguments, run_rsp

INTERVAL = 0.1           # s between two checks of a backend
FALL = RISE = 2
CHECK = {"path": "/healthz", "interval": INTERVAL, "timeout": 0.5, "rise": RISE, "fall": FALL}
POLL_TIMEOUT = 10.0      # s: a bound on waiting for something that must happen (a transition takes
                         # fall or rise intervals: 0.2 s here)
DEFAULT_INTERVAL = 2     # s: what a check's interval would be if nothing set it


# -- helpers -------------------------------------------------------------------------

def went_down_by_check(backend):
    return f"backend {backend_name(backend.host, backend.port)} is down: health check"


def came_up_by_check(backend):
    return f"backend {backend_name(backend.host, backend.port)} is up: health check"


def wait_for_checks(backend, more, path="/healthz"):
    """Waits (bounded) until `backend` got `more` health checks on top of
    those it has now."""
    target = backend.hits[path] + more
    netutil.wait_for(lambda: backend.hits[path] >= target,
                     f"{more} more health checks of {backend.name}", POLL_TIMEOUT)


def ask(proxy, count, path="/echo"):
    """`count` GETs one after another; who served each."""
    return [served_by(get(proxy.port, f"{path}?i={i}")) for i in range(count)]


def assert_transitions(proxy, backend, down, up):
    """rsp logged `down` "is down" lines and `up` "is up" lines for the
    backend's health checks."""
    assert_logged_times(proxy, went_down_by_check(backend), down)
    assert_logged_times(proxy, came_up_by_check(backend), up)


def wait_quiet(*backends):
    """Waits (bounded) until every connection each backend accepted has
    carried a request it counted: none is half-way (e.g. a health check
    being answered), and none was opened without a request."""
    netutil.wait_for(lambda: all(b.connections == b.total_hits for b in backends),
                     "every backend connection to carry a request", POLL_TIMEOUT)


# -- a backend goes down and comes back --------------------------------------------------

@pytest.mark.stage(8)
def test_failing_backend_is_taken_out_and_comes_back(make_backend, start_proxy):
    """Two backends take turns. When a's health endpoint starts answering
    503, a is logged down (once, however many checks fail after) and b
    gets every request; when it answers 200 again, a is logged up (once)
    and takes its turns again. b, healthy throughout, is never logged."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a, b, health_check=CHECK)
    assert sorted(ask(proxy, 4)) == ["a", "a", "b", "b"]

    a.health_status = 503
    wait_for_log(proxy, went_down_by_check(a), POLL_TIMEOUT)
    line = assert_logged_once(proxy, went_down_by_check(a))
    assert "503" in line, line
    before = a.requests
    assert ask(proxy, 10) == ["b"] * 10
    assert a.requests == before, "a backend marked down got a request"
    wait_for_checks(a, 3)
    assert_transitions(proxy, a, down=1, up=0)

    a.health_status = 200
    wait_for_log(proxy, came_up_by_check(a), POLL_TIMEOUT)
    assert sorted(ask(proxy, 4)) == ["a", "a", "b", "b"]
    wait_for_checks(a, 3)
    assert_transitions(proxy, a, down=1, up=1)
    assert_transitions(proxy, b, down=0, up=0)
    assert_logged_times(proxy, "is down (", 0)  # passive health saw nothing


@pytest.mark.stage(8)
def test_flapping_backend_needs_fall_and_rise_in_a_row(make_backend, start_proxy):
    """With fall = rise = 2, a backend whose checks alternate between 503
    and 200 is never marked down; once down (503 in a row), alternating
    checks never bring it back; 200 in a row does."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a, b, health_check=CHECK)
    a.health_status = [503, 200]
    wait_for_checks(a, 8)
    assert_transitions(proxy, a, down=0, up=0)

    a.health_status = 503
    wait_for_log(proxy, went_down_by_check(a), POLL_TIMEOUT)
    a.health_status = [200, 503]
    wait_for_checks(a, 8)
    assert_transitions(proxy, a, down=1, up=0)
    assert ask(proxy, 4) == ["b"] * 4

    a.health_status = 200
    wait_for_log(proxy, came_up_by_check(a), POLL_TIMEOUT)
    assert_transitions(proxy, a, down=1, up=1)


@pytest.mark.stage(8)
def test_backends_start_up(make_backend, start_proxy):
    """Backends count as up until their checks say otherwise: with checks
    a minute apart (and rise 2), both serve from the first request on."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a, b, health_check={"path": "/healthz", "interval": 60, "rise": 2})
    assert sorted(ask(proxy, 4)) == ["a", "a", "b", "b"]
    assert_transitions(proxy, a, down=0, up=0)


# -- what a check sends ------------------------------------------------------------------

@pytest.mark.stage(8)
def test_check_request(make_backend, start_proxy):
    """A check is `GET PATH HTTP/1.1` with Host: the backend as the config
    writes it (HOST:PORT) and Connection: close; it is not a request of a
    client (the backend sees nothing else)."""
    a = make_backend("a")
    start_proxy(a, health_check=CHECK)
    wait_for_checks(a, 3)
    assert a.requests == 0
    for method, target, version, headers in list(a.health_requests):
        assert (method, target, version) == ("GET", "/healthz", "HTTP/1.1")
        fields = {name.lower(): value for name, value in headers}
        assert fields.get("host") == f"{LOOPBACK}:{a.port}", headers
        assert fields.get("connection", "").lower() == "close", headers


@pytest.mark.stage(8)
def test_default_path_and_a_404_passes(make_backend, start_proxy):
    """Without a path, checks GET "/"; the test backend answers it 404,
    which passes (below 500: a server that answers is up)."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a, b, health_check={"interval": INTERVAL, "fall": 1})
    wait_for_checks(a, 4, path="/")
    assert a.hits["/healthz"] == 0
    assert_transitions(proxy, a, down=0, up=0)
    assert sorted(ask(proxy, 4)) == ["a", "a", "b", "b"]


# -- every backend down -------------------------------------------------------------------

@pytest.mark.stage(8)
def test_all_down_gets_503_without_connecting(make_backend, start_proxy):
    """When the checks of every backend fail, each request gets rsp's own
    503 page, and no backend sees a connection other than a health check;
    when one passes again, requests go to it."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_proxy(a, b, health_check=CHECK)
    a.health_status = b.health_status = 503
    wait_for_log(proxy, went_down_by_check(a), POLL_TIMEOUT)
    wait_for_log(proxy, went_down_by_check(b), POLL_TIMEOUT)
    for i in range(5):
        assert_rsp_page(get(proxy.port, f"/echo?i={i}"), 503, "Service Unavailable")
    wait_quiet(a, b)
    assert (a.requests, b.requests) == (0, 0), f"{a.hits}, {b.hits}"

    b.health_status = 200
    wait_for_log(proxy, came_up_by_check(b), POLL_TIMEOUT)
    assert ask(proxy, 3) == ["b"] * 3
    assert_transitions(proxy, a, down=1, up=0)
    assert_transitions(proxy, b, down=1, up=1)


# -- backends that cannot be checked ----------------------------------------------------------

@pytest.mark.stage(8)
def test_refused_backend_goes_down_and_comes_back(make_backend, start_proxy):
    """A backend whose port refuses connections is marked down by its
    checks before any client tries it (passive health never sees it), and
    gets no request; once something listens there, it is marked up and
    takes its turns."""
    a = make_backend("a")
    (port,) = closed_ports(1)
    proxy = start_proxy(a, (LOOPBACK, port), health_check=CHECK, down_time=60)
    refused = f"backend {backend_name(LOOPBACK, port)} is down: health check"
    wait_for_log(proxy, refused, POLL_TIMEOUT)
    assert ask(proxy, 6) == ["a"] * 6
    assert_logged_times(proxy, went_down(LOOPBACK, port), 0)

    late = make_backend("late", port=release_port(port))
    wait_for_log(proxy, came_up_by_check(late), POLL_TIMEOUT)
    assert sorted(ask(proxy, 4)) == ["a", "a", "late", "late"]
    assert_logged_once(proxy, refused)
    assert_logged_once(proxy, came_up_by_check(late))


@pytest.mark.stage(8)
def test_backend_that_never_answers_goes_down(make_backend, make_raw_backend, start_proxy):
    """A backend that accepts and reads the check but never answers fails
    each check after its timeout, is marked down (once), and gets no
    client request: only checks reach it."""
    a = make_backend("a")
    silent = make_raw_backend(hold_after_head)
    proxy = start_proxy(a, silent, response_timeout=1,  # a request sent there by mistake gets a 504 soon
                        health_check={"path": "/healthz", "interval": 0.3, "timeout": 0.2, "fall": FALL})
    down = went_down_by_check(silent)
    wait_for_log(proxy, down, POLL_TIMEOUT)
    assert ask(proxy, 6) == ["a"] * 6
    netutil.wait_for(lambda: len(silent.received) >= FALL, "the silent backend's checks recorded", POLL_TIMEOUT)
    assert all(head.startswith(b"GET /healthz HTTP/1.1\r\n") for head in silent.received), silent.received
    assert_logged_once(proxy, down)


# -- which pools are checked ------------------------------------------------------------------

@pytest.mark.stage(8)
def test_settings_per_pool_and_site(make_backend, start_proxy):
    """The top-level health_check is every pool's and site's default, a
    pool's own table takes its missing fields from it, and false turns
    checks off for a site; without any health_check nothing is checked.
    Here: the default site and pool app (its own table sets only fall)
    are checked on /healthz, pool other (its own path) on /, the site
    with false not at all, and a second proxy without health_check never
    checks its backend (watched for longer than the default interval)."""
    d, a, o, c, lone = (make_backend(n) for n in ("default", "app", "other", "www", "lone"))
    started = time.monotonic()
    proxy = start_proxy(
        d, health_check={"path": "/healthz", "interval": INTERVAL},
        pools={"app": {"backends": [a], "health_check": {"fall": 1}},
               "other": {"backends": [o], "health_check": {"path": "/"}}},
        sites={"app.example.com": {"pool": "app"}, "other.example.com": {"pool": "other"},
               "www.example.com": {"backends": [c], "health_check": False}})
    start_proxy(lone)
    wait_for_checks(d, 3)
    wait_for_checks(a, 3)
    wait_for_checks(o, 3, path="/")
    time.sleep(max(0.0, started + DEFAULT_INTERVAL + 0.5 - time.monotonic()))
    assert o.hits["/healthz"] == 0, o.hits
    assert (c.connections, lone.connections) == (0, 0), "a backend without checks was checked"
    assert_logged_times(proxy, "is down", 0)
    assert served_by(get(proxy.port, "/echo", host="www.example.com")) == "www"


# -- the settings ------------------------------------------------------------------------

B = (LOOPBACK, 1)  # a backend address nothing has to answer at: these configs never serve

CONFIG_ERRORS = [
    # (id, options, the setting the message must name, other words it must contain)
    ("number", dict(health_check=5), "health_check", ()),
    ("true", dict(health_check=True), "health_check", ()),
    ("string", dict(health_check="on"), "health_check", ()),
    ("path-relative", dict(health_check={"path": "healthz"}), "health_check.path", ()),
    ("path-empty", dict(health_check={"path": ""}), "health_check.path", ()),
    ("path-number", dict(health_check={"path": 5}), "health_check.path", ()),
    ("interval-zero", dict(health_check={"interval": 0}), "health_check.interval", ()),
    ("interval-negative", dict(health_check={"interval": -1}), "health_check.interval", ()),
    ("interval-string", dict(health_check={"interval": "1"}), "health_check.interval", ()),
    ("timeout-zero", dict(health_check={"timeout": 0}), "health_check.timeout", ()),
    ("timeout-table", dict(health_check={"timeout": {}}), "health_check.timeout", ()),
    ("rise-zero", dict(health_check={"rise": 0}), "health_check.rise", ()),
    ("rise-fraction", dict(health_check={"rise": 1.5}), "health_check.rise", ()),
    ("fall-zero", dict(health_check={"fall": 0}), "health_check.fall", ()),
    ("fall-fraction", dict(health_check={"fall": 2.5}), "health_check.fall", ()),
    ("stray-field", dict(health_check={"path": "/", "intervall": 1}), "health_check", ("intervall",)),
    ("pool-number", dict(pools={"app": {"backends": [B], "health_check": 5}}), "pools.app.health_check", ()),
    ("pool-interval", dict(pools={"app": {"backends": [B], "health_check": {"interval": 0}}}),
     "pools.app.health_check.interval", ()),
    ("pool-stray-field", dict(pools={"app": {"backends": [B], "health_check": {"rise": 2, "raise": 2}}}),
     "pools.app.health_check", ("raise",)),
    ("site-string", dict(sites={"www.example.com": {"backends": [B], "health_check": "no"}}),
     "health_check", ("www.example.com",)),
]


@pytest.mark.stage(8)
@pytest.mark.parametrize("options, setting, words", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_bad_health_check(rsp, tmp_path, options, setting, words):
    """A health_check that is not false or a table of valid fields is a
    config error: a non-zero exit status and one line on stderr naming the
    file and the setting (and a stray field by its name); nothing on
    stdout."""
    (path,) = proxy_arguments(rsp.stage, free_port(), [B], str(tmp_path), options)
    assert_config_error(run_rsp(rsp, [path], tmp_path), path, setting, quoted=False, words=words, status=None)


@pytest.mark.stage(8)
def test_health_check_false_and_full_table_accepted(make_backend, start_proxy):
    """health_check = false at the top level, and a table with every field
    (fractions for the times), are accepted and serve."""
    a = make_backend("a")
    off = start_proxy(a, health_check=False)
    assert served_by(get(off.port, "/echo")) == "a"
    full = start_proxy(a, health_check={"path": "/healthz", "interval": 0.25, "timeout": 0.125,
                                        "rise": 1, "fall": 1})
    assert served_by(get(full.port, "/echo")) == "a"
    wait_for_checks(a, 2)
    assert_logged_times(off, "health check", 0)
