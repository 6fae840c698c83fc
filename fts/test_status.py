"""The status listener (stage 12): status_listen opens a listener of its
own (loopback unless status_public) serving an HTML page at /, the
counters as JSON at /status.json and in Prometheus's text format at
/metrics; nothing else (404), GET and HEAD only (405 with Allow), a
malformed request a 400, Connection: close on every answer. The public
listener forwards those paths to the backends like any other.

Counters are checked against the traffic each test makes, exactly (no
other traffic reaches the proxy): requests by site and status code and
by status class, per backend, bytes from and to clients, open
connections and requests in flight while clients and a backend hold them,
timeouts, the config generation and reloads, and backends marked down by
active health checks or passive health. /metrics is read with a strict
parser of the exposition format (promparse.py, tested here too) and must
say what status.json says. The page is checked with html.parser and in a
headless Chromium driven by selenium (skipped without chromium,
chromedriver and python3-selenium; ./setup-env.sh installs them), which
leaves a screenshot in the test's tmp_path (and in test-results/ at the
top of the repository, if that directory exists).

Label values needing escapes (a quote, a backslash, a newline) cannot
arise from a config rsp accepts (backend, pool and site names are host
names, addresses and [A-Za-z0-9_.-]), so their escaping is tested in the
parser's own tests only.

Stage 12 is one process: status.json has no "workers" and /metrics no
rsp_workers or rsp_worker_restarts_total (both checked absent); they come
with the workers of stage 13, whose figures are checked added up across
two workers.

Counters change when a response ends, which the client may see a moment
before rsp has counted it: every read of a counter that must have moved
polls (bounded) until it has, then checks the exact values. Nothing here
measures time.
"""

import html.parser
import importlib.util
import collections
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import netutil
from backends import hold_after_head, read_head
from checks import assert_config_error, log_lines, wait_for_log, went_down
from client import Conn, Response, build_request, close_with_reset, connect, exchange, get, read_to_eof
from netutil import LOOPBACK, closed_ports, free_port, ipv6_loopback_available, wait_until_listening
from promparse import PromParseError, parse as parse_metrics, samples, value
from proxy import backend_address, proxy_arguments, run_rsp, tcp_socket_fds
from test_workers import owners, started_workers

pytestmark = pytest.mark.stage(12)

# The version status.json reports, by stage (rsp -v says the same: test_operations.py).
VERSIONS = {n: f"0.{n}.0" for n in range(12, 100)}
POLL_TIMEOUT = 5.0     # s: a bound on waiting for something that must happen (never a measurement)
HEALTH_TIMEOUT = 10.0  # s: a bound on a health check transition (fall or rise checks 0.1 s apart)
CHECK = {"path": "/healthz", "interval": 0.1, "timeout": 0.5, "rise": 2, "fall": 2}
CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
TIMEOUT_KINDS = ("connect", "header", "body", "response", "idle")
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every family /metrics must have: (TYPE, the label names of its samples).
FAMILIES = {
    "rsp_requests_total": ("counter", {"site", "code"}),
    "rsp_backend_up": ("gauge", {"pool", "backend"}),
    "rsp_backend_requests_total": ("counter", {"backend"}),
    "rsp_backend_in_flight": ("gauge", {"backend"}),
    "rsp_connections": ("gauge", set()),
    "rsp_requests_in_flight": ("gauge", set()),
    "rsp_bytes_total": ("counter", {"direction"}),
    "rsp_timeouts_total": ("counter", {"kind"}),
    "rsp_config_reloads_total": ("counter", {"result"}),
    "rsp_config_generation": ("gauge", set()),
    "rsp_workers": ("gauge", set()),
    "rsp_worker_restarts_total": ("counter", set()),
    "rsp_start_time_seconds": ("gauge", set()),
}
# The families and the status.json field that stage 13's workers add.
WORKER_FAMILIES = ("rsp_workers", "rsp_worker_restarts_total")
WORKERS_STAGE = 13
# What stage 20 (HTTP/2) adds: requests by protocol, open HTTP/2 connections
# and streams (status.json's "requests_by_protocol" and "http2").
PROTOCOL_FAMILIES = {
    "rsp_requests_by_protocol_total": ("counter", {"protocol"}),
    "rsp_http2_connections": ("gauge", set()),
    "rsp_http2_streams": ("gauge", set()),
}
PROTOCOL_STAGE = 20
# Families whose samples are there from the start, whatever the traffic.
ALWAYS = ("rsp_backend_up", "rsp_backend_requests_total", "rsp_backend_in_flight", "rsp_connections",
          "rsp_requests_in_flight", "rsp_bytes_total", "rsp_timeouts_total", "rsp_config_reloads_total",
          "rsp_config_generation", "rsp_workers", "rsp_worker_restarts_total", "rsp_start_time_seconds",
          *PROTOCOL_FAMILIES)

_stage_under_test = None


@pytest.fixture(autouse=True)
def _note_stage(rsp):
    """Notes the stage under test, for version_of()."""
    global _stage_under_test
    _stage_under_test = rsp.stage


def has_workers():
    """True if the stage under test has worker processes (and so reports
    on them: status.json's "workers", WORKER_FAMILIES)."""
    return _stage_under_test >= WORKERS_STAGE


def has_protocols():
    """True if the stage under test counts requests by protocol (and so
    reports PROTOCOL_FAMILIES and their status.json fields)."""
    return _stage_under_test >= PROTOCOL_STAGE


def families_expected():
    """FAMILIES, less WORKER_FAMILIES before the workers' stage, plus
    PROTOCOL_FAMILIES from theirs."""
    expected = {n: f for n, f in FAMILIES.items() if has_workers() or n not in WORKER_FAMILIES}
    if has_protocols():
        expected.update(PROTOCOL_FAMILIES)
    return expected


def version_of(proxy):
    """The version the proxy (of the stage under test) must report."""
    del proxy  # every proxy of a run is the same binary
    return VERSIONS[_stage_under_test]


needs_ipv6 = pytest.mark.skipif(not ipv6_loopback_available(), reason="no IPv6 loopback (::1) here")


# -- the parser of the exposition format ----------------------------------------------------

VALID_EXPOSITION = r'''# HELP rsp_requests_total Responses, by site and status code.
# TYPE rsp_requests_total counter
rsp_requests_total{site="www.example.com",code="200"} 9
rsp_requests_total{site="-",code="421"} 1 1795000000000
# a comment line, ignored

# HELP odd_total Escapes: a backslash \\ and a newline \n in help.
# TYPE odd_total counter
odd_total{v="q\"uote",w="back\\slash",x="new\nline",y="",} 1.5e3
# TYPE rsp_backend_up gauge
rsp_backend_up{pool="default",backend="[::1]:8001"} 0
rsp_backend_up { pool = "app" , backend = "127.0.0.1:8002" } -0.25
# TYPE special gauge
special{k="a"} +Inf
special{k="b"} -Inf
special{k="c"} NaN
untyped_thing 42
'''


def test_promparse_reads_a_valid_exposition():
    """The parser itself: families with their HELP (unescaped), TYPE and
    samples keyed by label set (label values unescaped: \\" \\\\ \\n), a
    sample with a timestamp, a trailing comma and blanks in a label set,
    +Inf/-Inf/NaN, a sample without HELP/TYPE, comments and empty lines."""
    families = parse_metrics(VALID_EXPOSITION)
    assert set(families) == {"rsp_requests_total", "odd_total", "rsp_backend_up", "special", "untyped_thing"}
    assert families["rsp_requests_total"]["help"] == "Responses, by site and status code."
    assert families["rsp_requests_total"]["type"] == "counter"
    assert families["rsp_requests_total"]["samples"] == {
        frozenset({("site", "www.example.com"), ("code", "200")}): 9.0,
        frozenset({("site", "-"), ("code", "421")}): 1.0}
    assert families["odd_total"]["help"] == "Escapes: a backslash \\ and a newline \n in help."
    assert families["odd_total"]["samples"] == {
        frozenset({("v", 'q"uote'), ("w", "back\\slash"), ("x", "new\nline"), ("y", "")}): 1500.0}
    assert value(families, "rsp_backend_up", pool="default", backend="[::1]:8001") == 0
    assert value(families, "rsp_backend_up", pool="app", backend="127.0.0.1:8002") == -0.25
    assert families["rsp_backend_up"]["help"] is None and families["rsp_backend_up"]["type"] == "gauge"
    assert value(families, "special", k="a") == math.inf
    assert value(families, "special", k="b") == -math.inf
    assert math.isnan(value(families, "special", k="c"))
    assert families["untyped_thing"] == {"help": None, "type": None, "samples": {frozenset(): 42.0}}
    assert parse_metrics("") == {}


BROKEN_EXPOSITIONS = [
    ("bad-escape-in-label-value", 'm{a="x\\y"} 1\n', 1),
    ("bad-escape-in-help", "# HELP m a tab\\t\nm 1\n", 1),
    ("duplicate-sample", '# TYPE m gauge\nm{a="1",b="2"} 1\nm{b="2",a="1"} 2\n', 3),
    ("duplicate-sample-without-labels", "m 1\nm 2\n", 2),
    ("interleaved-families", '# TYPE a gauge\na{x="1"} 1\n# TYPE b gauge\nb 1\na{x="2"} 2\n', 5),
    ("type-of-another-family-between", "# TYPE a gauge\n# TYPE b gauge\na 1\n", 3),
    ("help-after-samples", "# TYPE m gauge\nm 1\n# HELP m late\n", 3),
    ("type-after-samples", "m 1\n# TYPE m gauge\n", 2),
    ("second-help", "# HELP m one\n# HELP m two\nm 1\n", 2),
    ("second-type", "# TYPE m_total counter\n# TYPE m_total counter\nm_total 1\n", 2),
    ("counter-without-_total", "# TYPE requests counter\nrequests 1\n", 1),
    ("unknown-type", "# TYPE m meter\nm 1\n", 1),
    ("bad-metric-name", "# TYPE m gauge\nm 1\n1m 2\n", 3),
    ("bad-metric-name-dash", "rsp-requests 2\n", 1),
    ("bad-name-in-type", "# TYPE 9m gauge\n", 1),
    ("bad-label-name", 'm{a-b="1"} 1\n', 1),
    ("label-name-with-colon", 'm{a:b="1"} 1\n', 1),
    ("reserved-label-name", 'm{__name__="x"} 1\n', 1),
    ("duplicate-label", 'm{a="1",a="2"} 1\n', 1),
    ("unquoted-label-value", "m{a=1} 1\n", 1),
    ("unterminated-label-value", 'ok 1\nm{a="1} 1\n', 2),
    ("missing-value", 'm{a="1"}\n', 1),
    ("bad-value", "m one\n", 1),
    ("value-infinity-word", "m Infinity\n", 1),
    ("no-blank-before-value", 'm{a="1"}1\n', 1),
    ("bad-timestamp", "m 1 12.5\n", 1),
    ("extra-field", "m 1 2 3\n", 1),
    ("no-final-newline", "# TYPE m gauge\nm 1", 2),
    ("carriage-return", "m 1\r\n", 1),
    ("leading-blank", " m 1\n", 1),
]


@pytest.mark.parametrize("text, line", [b[1:] for b in BROKEN_EXPOSITIONS], ids=[b[0] for b in BROKEN_EXPOSITIONS])
def test_promparse_rejects(text, line):
    """The parser itself refuses each kind of malformed exposition, naming
    the line (so that it cannot silently accept what rsp gets wrong)."""
    with pytest.raises(PromParseError) as caught:
        parse_metrics(text)
    assert caught.value.lineno == line, f"{caught.value} (expected line {line})"
    assert str(caught.value).startswith(f"line {line}: "), str(caught.value)


# -- helpers ---------------------------------------------------------------------------------

def start_with_status(start_proxy, *backends, **options):
    """rsp in front of `backends` (with start_proxy's `options`) and a
    status listener on 127.0.0.1:a free port (proxy.status_port). The
    status options are kept in proxy.status_options for a rewrite of the
    config (a reload)."""
    port = free_port()
    status_options = {"status_listen": f"{LOOPBACK}:{port}"}
    proxy = start_proxy(*backends, **status_options, **options)
    wait_until_listening(port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = port
    proxy.status_options = status_options
    return proxy


def ask_status(port, data, address=LOOPBACK, timeout=POLL_TIMEOUT):
    """Sends `data` (bytes, or a path for a GET in HTTP/1.1 without
    Connection: close) to the status listener and reads until the
    connection ends, which must happen within `timeout` s: the status
    listener closes after every answer."""
    if isinstance(data, str):
        data = f"GET {data} HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\n\r\n".encode()
    try:
        return exchange(port, data, address=address, timeout=timeout)
    except TimeoutError as e:
        pytest.fail(f"the status listener did not close the connection after {data[:80]!r}: {e}")


def assert_status_answer(r, status, content_type=None, head=False):
    """r is an answer of the status listener: that status, Connection:
    close, Cache-Control: no-store, a Content-Length (the body's length;
    with head, no body at all), closed with a FIN."""
    assert r.status == status, f"expected {status}, got {r!r}: {r.raw[:300]!r}"
    assert r.header("Connection") == "close", r.headers
    assert r.header("Cache-Control") == "no-store", r.headers
    length = r.header("Content-Length")
    assert length is not None and length.isdigit(), r.headers
    if head:
        assert r.body == b"", f"a HEAD got a body: {r.body[:200]!r}"
    else:
        assert int(length) == len(r.body), f"Content-Length {length}, body of {len(r.body)} bytes"
    if content_type is not None:
        assert r.header("Content-Type") == content_type, r.headers
    assert not r.reset, "the status listener reset the connection instead of closing it"


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def status_json(proxy):
    """GET /status.json: the parsed document (strict JSON: no NaN/Infinity)."""
    r = ask_status(proxy.status_port, "/status.json")
    assert_status_answer(r, 200, "application/json")
    try:
        return json.loads(r.body.decode("utf-8"), parse_constant=reject_constant)
    except ValueError as e:
        pytest.fail(f"/status.json is not JSON: {e}\n{r.body[:2000]!r}")


def metrics(proxy):
    """GET /metrics: the families, by the strict parser."""
    r = ask_status(proxy.status_port, "/metrics")
    assert_status_answer(r, 200, METRICS_TYPE)
    try:
        return parse_metrics(r.body.decode("utf-8"))
    except (PromParseError, UnicodeDecodeError) as e:
        pytest.fail(f"/metrics is not a valid exposition: {e}\n--- /metrics ---\n{r.body.decode('latin-1')}")


def wait_status(proxy, condition, what, timeout=POLL_TIMEOUT):
    """Polls /status.json (bounded) until condition(document) is true;
    returns that document."""
    seen = []

    def check():
        seen[:] = [status_json(proxy)]
        return condition(seen[0])
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not the case after {timeout} s; /status.json says\n"
                        f"{json.dumps(seen[0], indent=1)}")
        time.sleep(0.05)
    return seen[0]


def is_int(x):
    return type(x) is int


def is_number(x):
    return type(x) in (int, float) and math.isfinite(x)


def check_shape(doc, proxy):
    """Every field of the spec is there with its type, and the sums agree:
    requests_total is the sum over sites and over classes, each site's
    requests the sum of its codes. Returns the document."""
    fields = ("version", "pid", "started_at", "uptime_seconds", "generation", "generation_loaded_at", "reloads",
              "connections", "requests_in_flight", "requests_total", "requests_by_class", "timeouts",
              "bytes", "sites", "pools", "history") + (("workers",) if has_workers() else ())
    missing = [f for f in fields if f not in doc]
    assert not missing, f"/status.json lacks {missing}: {doc}"
    assert doc["version"] == version_of(proxy), doc["version"]
    assert is_int(doc["pid"]) and doc["pid"] == proxy.pid, (doc["pid"], proxy.pid)
    for name in ("started_at", "uptime_seconds", "generation_loaded_at"):
        assert is_number(doc[name]) and doc[name] >= 0, (name, doc[name])
    for name in ("generation", "connections", "requests_in_flight", "requests_total"):
        assert is_int(doc[name]) and doc[name] >= 0, (name, doc[name])
    assert doc["generation"] >= 1
    assert set(doc["reloads"]) >= {"ok", "failed"} and all(is_int(doc["reloads"][k]) for k in ("ok", "failed")), \
        doc["reloads"]
    if has_workers():
        workers = doc["workers"]
        assert set(workers) >= {"configured", "pids", "restarts"}, workers
        assert is_int(workers["configured"]) and is_int(workers["restarts"]), workers
        assert isinstance(workers["pids"], list) and all(is_int(p) for p in workers["pids"]), workers
    else:
        assert "workers" not in doc, f"stage {_stage_under_test} has no workers to report: {doc['workers']}"
    assert set(doc["requests_by_class"]) == set(CLASSES), doc["requests_by_class"]
    assert all(is_int(v) and v >= 0 for v in doc["requests_by_class"].values()), doc["requests_by_class"]
    assert set(doc["timeouts"]) == set(TIMEOUT_KINDS), doc["timeouts"]
    assert all(is_int(v) and v >= 0 for v in doc["timeouts"].values()), doc["timeouts"]
    assert set(doc["bytes"]) >= {"in", "out"} and all(is_int(doc["bytes"][k]) for k in ("in", "out")), doc["bytes"]
    assert isinstance(doc["sites"], list), doc["sites"]
    for site in doc["sites"]:
        assert isinstance(site.get("name"), str) and is_int(site.get("requests")), site
        codes = site.get("codes")
        assert isinstance(codes, dict), site
        assert all(re.fullmatch(r"[1-5]\d\d", c) and is_int(n) and n >= 0 for c, n in codes.items()), site
        assert site["requests"] == sum(codes.values()), f"a site's requests are not the sum of its codes: {site}"
    names = [s["name"] for s in doc["sites"]]
    assert len(names) == len(set(names)), f"a site listed twice: {names}"
    assert doc["requests_total"] == sum(s["requests"] for s in doc["sites"]), \
        f"requests_total {doc['requests_total']} is not the sum over sites {doc['sites']}"
    assert doc["requests_total"] == sum(doc["requests_by_class"].values()), \
        f"requests_total {doc['requests_total']} is not the sum over classes {doc['requests_by_class']}"
    for site in doc["sites"]:
        for code, n in site["codes"].items():
            assert doc["requests_by_class"][code[0] + "xx"] >= n, (site, doc["requests_by_class"])
    assert isinstance(doc["pools"], list) and doc["pools"], doc["pools"]
    for pool in doc["pools"]:
        assert isinstance(pool.get("name"), str) and isinstance(pool.get("balance"), str), pool
        assert isinstance(pool.get("backends"), list) and pool["backends"], pool
        for b in pool["backends"]:
            assert isinstance(b.get("name"), str), b
            assert type(b.get("up")) is bool, b
            assert b.get("active_health") in ("up", "down", "unchecked"), b
            assert b.get("passive_health") in ("up", "down"), b
            for counter in ("in_flight", "requests", "failures"):
                assert is_int(b.get(counter)) and b[counter] >= 0, b
            assert b["up"] == (b["active_health"] != "down" and b["passive_health"] != "down"), \
                f"up must be false exactly when active or passive health says down: {b}"
    pool_names = [p["name"] for p in doc["pools"]]
    assert len(pool_names) == len(set(pool_names)), f"a pool listed twice: {pool_names}"
    history = doc["history"]
    assert history.get("interval_seconds") == 1, history
    rps = history.get("requests_per_second")
    assert isinstance(rps, list) and len(rps) <= 300 and all(is_number(v) and v >= 0 for v in rps), history
    if has_protocols():
        check_protocols(doc)
    return doc


def check_protocols(doc):
    """Stage 20's fields: requests_by_protocol ({"http1": N, "http2": N})
    adds up to requests_total; "http2" has the open connections and
    streams, never below 0."""
    by_protocol, http2 = doc.get("requests_by_protocol"), doc.get("http2")
    assert isinstance(by_protocol, dict) and set(by_protocol) == {"http1", "http2"}, \
        f"requests_by_protocol must be {{http1, http2}}: {by_protocol!r}"
    assert all(is_int(v) and v >= 0 for v in by_protocol.values()), by_protocol
    assert sum(by_protocol.values()) == doc["requests_total"], \
        f"requests_by_protocol {by_protocol} does not add up to requests_total {doc['requests_total']}"
    assert isinstance(http2, dict) and set(http2) == {"connections", "streams"}, \
        f"http2 must be {{connections, streams}}: {http2!r}"
    assert all(is_int(v) and v >= 0 for v in http2.values()), http2


def sites_by_name(doc):
    return {s["name"]: s for s in doc["sites"]}


def pools_by_name(doc):
    return {p["name"]: p for p in doc["pools"]}


def backend_entry(doc, pool, name):
    """The entry of backend `name` ("HOST:PORT") in pool `pool`."""
    pools = pools_by_name(doc)
    assert pool in pools, f"no pool {pool!r} in {list(pools)}"
    found = [b for b in pools[pool]["backends"] if b["name"] == name]
    assert len(found) == 1, f"backend {name} in pool {pool}: {pools[pool]['backends']}"
    return found[0]


def name_of(backend):
    host, port = backend_address(backend)
    return f"{host}:{port}"


def assert_metrics_match(families, doc):
    """/metrics says what /status.json says: the families of the spec, each
    with HELP and TYPE, their labels, and the same values."""
    for name, family in families.items():
        assert family["help"], f"family {name} has no HELP (or an empty one)"
        assert family["type"] is not None, f"family {name} has no TYPE"
    if not has_workers():
        extra = [name for name in WORKER_FAMILIES if name in families]
        assert not extra, f"stage {_stage_under_test} has no workers, yet /metrics has {extra}"
    for name, (kind, labels) in families_expected().items():
        if name not in families and name not in ALWAYS and not doc["requests_total"]:
            continue  # no sample yet: HELP and TYPE alone may be left out
        assert name in families, f"/metrics lacks the family {name}: it has {sorted(families)}"
        assert families[name]["type"] == kind, f"{name} is a {families[name]['type']}, not a {kind}"
        for sample_labels, _ in samples(families, name):
            assert set(sample_labels) == labels, f"{name} has labels {sorted(sample_labels)}, not {sorted(labels)}"

    seen = {(s["name"], code): n for s in doc["sites"] for code, n in s["codes"].items() if n}
    got = {(l["site"], l["code"]): v for l, v in samples(families, "rsp_requests_total")} \
        if "rsp_requests_total" in families else {}
    assert got == seen, f"rsp_requests_total {got} != status.json's sites {seen}"

    up = {(p["name"], b["name"]): (1 if b["up"] else 0) for p in doc["pools"] for b in p["backends"]}
    got = {(l["pool"], l["backend"]): v for l, v in samples(families, "rsp_backend_up")}
    assert got == up, f"rsp_backend_up {got} != status.json's pools {up}"

    # One sample per backend: a backend in two pools is one backend. Its
    # entries in status.json may each show its count, or each the count of
    # its requests through that pool; the metric is then the one value,
    # or their sum.
    for family, field in (("rsp_backend_requests_total", "requests"), ("rsp_backend_in_flight", "in_flight")):
        entries = {}
        for p in doc["pools"]:
            for b in p["backends"]:
                entries.setdefault(b["name"], []).append(b[field])
        got = {l["backend"]: v for l, v in samples(families, family)}
        assert set(got) == set(entries), f"{family} has backends {sorted(got)}, status.json {sorted(entries)}"
        for name, values in entries.items():
            allowed = {sum(values)} | ({values[0]} if len(set(values)) == 1 else set())
            assert got[name] in allowed, f"{family}{{backend={name!r}}} is {got[name]}, status.json says {values}"

    assert value(families, "rsp_connections") == doc["connections"]
    assert value(families, "rsp_requests_in_flight") == doc["requests_in_flight"]
    assert {l["direction"]: v for l, v in samples(families, "rsp_bytes_total")} == \
        {"in": doc["bytes"]["in"], "out": doc["bytes"]["out"]}
    assert {l["kind"]: v for l, v in samples(families, "rsp_timeouts_total")} == doc["timeouts"]
    assert {l["result"]: v for l, v in samples(families, "rsp_config_reloads_total")} == \
        {"ok": doc["reloads"]["ok"], "failed": doc["reloads"]["failed"]}
    assert value(families, "rsp_config_generation") == doc["generation"]
    if has_workers():
        workers = doc["workers"]
        live = 1 if workers["configured"] == 1 else len(workers["pids"])
        assert value(families, "rsp_workers") == live
        assert value(families, "rsp_worker_restarts_total") == workers["restarts"]
    assert abs(value(families, "rsp_start_time_seconds") - doc["started_at"]) < 0.01, \
        (value(families, "rsp_start_time_seconds"), doc["started_at"])
    if has_protocols():
        assert {l["protocol"]: v for l, v in samples(families, "rsp_requests_by_protocol_total")} == \
            doc["requests_by_protocol"]
        assert value(families, "rsp_http2_connections") == doc["http2"]["connections"]
        assert value(families, "rsp_http2_streams") == doc["http2"]["streams"]
    else:
        extra = [name for name in PROTOCOL_FAMILIES if name in families]
        assert not extra, f"stage {_stage_under_test} counts no protocols, yet /metrics has {extra}"


def settled_status(proxy, total):
    """status.json once requests_total is `total` (bounded poll) and
    nothing is in flight, checked for shape; then /metrics, which must
    agree with it (nothing moves meanwhile: no traffic)."""
    doc = wait_status(proxy, lambda d: d["requests_total"] >= total and d["requests_in_flight"] == 0,
                      f"requests_total {total}")
    check_shape(doc, proxy)
    assert doc["requests_total"] == total, f"requests_total {doc['requests_total']}, {total} requests were made"
    assert_metrics_match(metrics(proxy), doc)
    return doc


class Traffic:
    """Requests to the public listener, each on its own connection, read
    to the end; counts the bytes sent and received."""

    def __init__(self, port):
        self.port = port
        self.sent = self.received = 0

    def send(self, data):
        r = exchange(self.port, data, timeout=POLL_TIMEOUT)
        self.sent += len(data)
        self.received += len(r.raw)
        assert not r.reset, f"{data[:60]!r} ended with a reset"
        return r

    def get(self, path, host, method="GET", body=b""):
        return self.send(build_request(self.port, method, path, body=body, host=host))


def config_path(proxy):
    return proxy.args[0]


def rewrite_config(rsp, proxy, tmp_path, backends, **options):
    """The proxy's config file rewritten: these backends and options, and
    its status listener as before."""
    (path,) = proxy_arguments(rsp.stage, proxy.port, [backend_address(b) for b in backends], str(tmp_path),
                              {**proxy.status_options, **options})
    assert path == config_path(proxy)
    return path


def reload_and_wait(proxy, text):
    """SIGHUP, then a bounded wait for a new log line containing `text`."""
    before = len(log_lines(proxy, text))
    os.kill(proxy.pid, signal.SIGHUP)
    netutil.wait_for(lambda: len(log_lines(proxy, text)) > before or not proxy.alive(),
                     f"{text!r} in rsp's log after SIGHUP", POLL_TIMEOUT)
    assert proxy.alive(), f"rsp died on SIGHUP\n{proxy.describe()}"


def listening_ports(pid):
    """The ports process `pid` listens on (TCP)."""
    return sorted(entry[0] for _, _, entry in tcp_socket_fds(pid) if entry[2] == "0A")


# -- status.json ------------------------------------------------------------------------------

def test_status_json_at_start(make_backend, start_proxy):
    """Right after start: every field of the spec with its type; the
    version, the pid of rsp (one process; from stage 13: workers configured
    1, no pids, no restarts), started_at at the start, generation 1, no reload,
    nothing counted (the status requests themselves are not traffic),
    every site of the config listed with zero counts ("-" not yet), every
    pool (the default site's "default", a named pool by its name, a site's
    own backends by the site's name) with its balance and backends, all
    up, unchecked without health checks, nothing in flight; uptime moves
    on."""
    a, b, c = make_backend("a"), make_backend("b"), make_backend("c")
    before = time.time()
    proxy = start_with_status(start_proxy, a, sites={"www.example.test": [b], "app.test": {"pool": "app"}},
                              pools={"app": {"backends": [c], "balance": "least_conn"}})
    after = time.time()
    doc = check_shape(status_json(proxy), proxy)
    assert before - 1 <= doc["started_at"] <= after + 1, (before, doc["started_at"], after)
    assert doc["generation"] == 1
    assert doc["started_at"] - 1 <= doc["generation_loaded_at"] <= after + 1, doc
    assert doc["reloads"] == {"ok": 0, "failed": 0}
    if has_workers():
        assert doc["workers"] == {"configured": 1, "pids": [], "restarts": 0}
    assert doc["uptime_seconds"] <= time.time() - before + 1, doc["uptime_seconds"]
    assert (doc["connections"], doc["requests_in_flight"], doc["requests_total"]) == (0, 0, 0), doc
    assert doc["requests_by_class"] == dict.fromkeys(CLASSES, 0)
    assert doc["timeouts"] == dict.fromkeys(TIMEOUT_KINDS, 0)
    assert (doc["bytes"]["in"], doc["bytes"]["out"]) == (0, 0), doc["bytes"]
    sites = sites_by_name(doc)
    assert set(sites) == {"www.example.test", "app.test", "default"}, list(sites)
    assert all(s["requests"] == 0 and not any(s["codes"].values()) for s in sites.values()), doc["sites"]
    pools = pools_by_name(doc)
    assert set(pools) == {"default", "www.example.test", "app"}, list(pools)
    assert pools["default"]["balance"] == "round_robin" and pools["app"]["balance"] == "least_conn", pools
    for pool, backend in (("default", a), ("www.example.test", b), ("app", c)):
        assert [x["name"] for x in pools[pool]["backends"]] == [name_of(backend)], pools[pool]
        assert backend_entry(doc, pool, name_of(backend)) == {
            **backend_entry(doc, pool, name_of(backend)),
            "up": True, "active_health": "unchecked", "passive_health": "up", "in_flight": 0, "requests": 0,
            "failures": 0}
    assert sum(doc["history"]["requests_per_second"]) == 0, doc["history"]
    assert_metrics_match(metrics(proxy), doc)
    assert "rsp_requests_total" not in metrics(proxy) or not metrics(proxy)["rsp_requests_total"]["samples"]
    # uptime moves on (a bounded poll, not a measurement)
    first = doc["uptime_seconds"]
    wait_status(proxy, lambda d: d["uptime_seconds"] > first, "uptime_seconds growing")
    assert a.total_hits == b.total_hits == c.total_hits == 0, "a status request reached a backend"


def test_counters_count_the_requests_made(make_backend, start_proxy):
    """Eleven requests through the public listener, of known outcomes: four
    200s and a backend's 404 for www.example.test, two 200s (one a POST)
    for api.example.test, rsp's own 421 twice (a Host no site takes: site
    "-") and 400 once (garbage), and a 502 for dead.test (its one backend
    refuses). status.json counts exactly these, by site and code, by
    class, per backend (requests; the dead one's failed connect and its
    passive health), bytes read from clients (at most what they sent, at
    least their complete requests) and written to them (exactly what they
    got); /metrics says the same; a second round doubles every count."""
    a, b = make_backend("a"), make_backend("b")
    (dead_port,) = closed_ports(1)
    dead = (LOOPBACK, dead_port)
    proxy = start_with_status(start_proxy, sites={"www.example.test": [a], "api.example.test": [b],
                                                  "dead.test": [dead]}, down_time=60)
    traffic = Traffic(proxy.port)
    complete = 0   # bytes of requests rsp must read in full

    def round_of_requests():
        nonlocal complete
        before = traffic.sent
        for i in range(4):
            r = traffic.get(f"/echo?i={i}", "www.example.test")
            assert r.status == 200 and r.header("X-Backend") == "a", r
        r = traffic.get("/no/such/route", "www.example.test")
        assert r.status == 404 and r.header("X-Backend") == "a", r
        r = traffic.get("/echo", "api.example.test")
        assert r.status == 200 and r.header("X-Backend") == "b", r
        r = traffic.get("/echo", "api.example.test", method="POST", body=b"x" * 1000)
        assert r.status == 200 and r.json()["body_length"] == 1000, r
        for _ in range(2):
            assert traffic.get("/", "unknown.test").status == 421
        assert traffic.get("/echo", "dead.test").status == 502
        complete += traffic.sent - before
        assert traffic.send(b"GARBAGE\r\n\r\n").status == 400

    round_of_requests()
    doc = settled_status(proxy, 11)
    sites = sites_by_name(doc)
    assert set(sites) == {"www.example.test", "api.example.test", "dead.test", "-"}, list(sites)
    assert sites["www.example.test"]["codes"] == {"200": 4, "404": 1}, sites["www.example.test"]
    assert sites["api.example.test"]["codes"] == {"200": 2}, sites["api.example.test"]
    assert sites["dead.test"]["codes"] == {"502": 1}, sites["dead.test"]
    assert sites["-"]["codes"] == {"421": 2, "400": 1}, sites["-"]
    assert doc["requests_by_class"] == {"1xx": 0, "2xx": 6, "3xx": 0, "4xx": 4, "5xx": 1}
    assert backend_entry(doc, "www.example.test", name_of(a))["requests"] == a.requests == 5
    assert backend_entry(doc, "api.example.test", name_of(b))["requests"] == b.requests == 2
    for pool, backend in (("www.example.test", a), ("api.example.test", b)):
        entry = backend_entry(doc, pool, name_of(backend))
        assert (entry["failures"], entry["up"], entry["passive_health"]) == (0, True, "up"), entry
    entry = backend_entry(doc, "dead.test", name_of(dead))
    assert entry["failures"] == 1, f"one connect to the dead backend failed: {entry}"
    assert (entry["up"], entry["passive_health"], entry["active_health"]) == (False, "down", "unchecked"), entry
    assert complete <= doc["bytes"]["in"] <= traffic.sent, (doc["bytes"], complete, traffic.sent)
    assert doc["bytes"]["out"] == traffic.received, (doc["bytes"], traffic.received)
    assert doc["timeouts"] == dict.fromkeys(TIMEOUT_KINDS, 0)
    assert (doc["connections"], doc["requests_in_flight"]) == (0, 0), doc

    round_of_requests()
    doc = settled_status(proxy, 22)
    sites = sites_by_name(doc)
    assert sites["www.example.test"]["codes"] == {"200": 8, "404": 2}
    assert sites["api.example.test"]["codes"] == {"200": 4}
    assert sites["-"]["codes"] == {"421": 4, "400": 2}
    assert sites["dead.test"]["codes"] == {"502": 2}
    assert doc["requests_by_class"] == {"1xx": 0, "2xx": 12, "3xx": 0, "4xx": 8, "5xx": 2}
    assert backend_entry(doc, "www.example.test", name_of(a))["requests"] == a.requests == 10
    assert complete <= doc["bytes"]["in"] <= traffic.sent, (doc["bytes"], complete, traffic.sent)
    assert doc["bytes"]["out"] == traffic.received, (doc["bytes"], traffic.received)
    families = metrics(proxy)
    assert value(families, "rsp_requests_total", site="www.example.test", code="200") == 8
    assert value(families, "rsp_requests_total", site="-", code="421") == 4
    assert value(families, "rsp_requests_total", site="dead.test", code="502") == 2
    assert value(families, "rsp_backend_up", pool="dead.test", backend=name_of(dead)) == 0
    assert value(families, "rsp_backend_up", pool="www.example.test", backend=name_of(a)) == 1
    assert value(families, "rsp_backend_requests_total", backend=name_of(b)) == 4
    assert value(families, "rsp_bytes_total", direction="out") == traffic.received


def test_history_counts_the_requests(backend, start_proxy):
    """The requests-per-second history adds up to the requests made (once
    the seconds they fell in are over; a bounded poll)."""
    proxy = start_with_status(start_proxy, backend)
    traffic = Traffic(proxy.port)
    for i in range(7):
        assert traffic.get(f"/echo?i={i}", "x.test").status == 200
    settled_status(proxy, 7)
    doc = wait_status(proxy, lambda d: sum(d["history"]["requests_per_second"]) >= 7,
                      "the history adding up to the 7 requests")
    assert sum(doc["history"]["requests_per_second"]) == 7, doc["history"]
    assert doc["history"]["interval_seconds"] == 1


def test_connections_counted_while_open(backend, start_proxy):
    """Two keep-alive clients (each after a request) and one that sent
    nothing are three open connections, in status.json and /metrics, with
    nothing in flight; once they close, none (status requests are not
    client connections)."""
    proxy = start_with_status(start_proxy, backend)
    kept = [Conn(proxy.port), Conn(proxy.port)]
    silent = connect(proxy.port)
    try:
        for c in kept:
            assert c.get("/echo").status == 200
        doc = wait_status(proxy, lambda d: d["connections"] >= 3, "3 open client connections")
        check_shape(doc, proxy)
        assert doc["connections"] == 3, doc["connections"]
        assert doc["requests_in_flight"] == 0 and doc["requests_total"] == 2, doc
        families = metrics(proxy)
        assert value(families, "rsp_connections") == 3
        assert value(families, "rsp_requests_in_flight") == 0
    finally:
        for c in kept:
            c.close()
        silent.close()
    doc = wait_status(proxy, lambda d: d["connections"] == 0, "no open client connection")
    assert doc["requests_total"] == 2
    assert value(metrics(proxy), "rsp_connections") == 0


def test_requests_in_flight_at_a_slow_backend(make_raw_backend, make_backend, start_proxy):
    """Three requests held by a backend that answers only when the test
    lets it: status.json says three requests in flight, the held backend
    three in flight and the other none, three client connections; /metrics
    the same. Once answered: nothing in flight, three 200s counted, the
    backend's three requests."""
    release = threading.Event()
    arrived = []

    def hold_then_answer(conn, raw):
        arrived.append(read_head(conn))
        release.wait(POLL_TIMEOUT * 2)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nheld")

    slow = make_raw_backend(hold_then_answer)
    other = make_backend("other")
    proxy = start_with_status(start_proxy, sites={"slow.test": [slow], "other.test": [other]})
    results = []

    def client(i):
        results.append(exchange(proxy.port, build_request(proxy.port, "GET", f"/held/{i}", host="slow.test"),
                                timeout=POLL_TIMEOUT * 3))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        netutil.wait_for(lambda: len(arrived) == 3, "3 requests at the slow backend", POLL_TIMEOUT)
        doc = wait_status(proxy, lambda d: d["requests_in_flight"] >= 3, "3 requests in flight")
        check_shape(doc, proxy)
        assert doc["requests_in_flight"] == 3 and doc["connections"] == 3, doc
        assert doc["requests_total"] == 0, "a request held at its backend was counted as finished"
        assert backend_entry(doc, "slow.test", name_of(slow))["in_flight"] == 3, doc["pools"]
        assert backend_entry(doc, "other.test", name_of(other))["in_flight"] == 0, doc["pools"]
        families = metrics(proxy)
        assert value(families, "rsp_requests_in_flight") == 3
        assert value(families, "rsp_backend_in_flight", backend=name_of(slow)) == 3
        assert value(families, "rsp_backend_in_flight", backend=name_of(other)) == 0
    finally:
        release.set()
        for t in threads:
            t.join(POLL_TIMEOUT * 3)
    assert [r.status for r in results] == [200, 200, 200], results
    doc = settled_status(proxy, 3)
    assert backend_entry(doc, "slow.test", name_of(slow))["in_flight"] == 0
    assert backend_entry(doc, "slow.test", name_of(slow))["requests"] == 3
    assert sites_by_name(doc)["slow.test"]["codes"] == {"200": 3}
    wait_status(proxy, lambda d: d["connections"] == 0, "no open client connection")


def test_client_leaving_counted_as_499(make_raw_backend, start_proxy):
    """A client that resets its connection while its request waits at a
    backend (which never answers) is counted when it leaves, as a 499
    (the access log's convention): nothing left in flight, no connection
    open, the backend's in_flight back to 0."""
    held = make_raw_backend(hold_after_head)
    proxy = start_with_status(start_proxy, held)
    sock = connect(proxy.port)
    try:
        sock.sendall(build_request(proxy.port, "GET", "/leaving", host="x.test"))
        netutil.wait_for(lambda: held.received, "the request at the backend", POLL_TIMEOUT)
        doc = wait_status(proxy, lambda d: d["requests_in_flight"] == 1, "the request in flight")
        assert doc["requests_total"] == 0 and backend_entry(doc, "default", name_of(held))["in_flight"] == 1, doc
    finally:
        close_with_reset(sock)
    doc = settled_status(proxy, 1)
    assert sites_by_name(doc)["default"]["codes"] == {"499": 1}, doc["sites"]
    assert doc["requests_by_class"]["4xx"] == 1 and doc["connections"] == 0, doc
    assert backend_entry(doc, "default", name_of(held))["in_flight"] == 0, doc["pools"]


@needs_ipv6
def test_ipv6_backend_named_in_status(make_raw_backend, start_proxy):
    """A backend on ::1 is named "[::1]:PORT" in status.json, in /metrics
    labels and in the page's data-backend."""
    def answer(conn, backend):
        read_head(conn)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    six = make_raw_backend(answer, address="::1")
    name = f"[::1]:{six.port}"
    proxy = start_with_status(start_proxy, six)
    r = exchange(proxy.port, build_request(proxy.port, "GET", "/", host="x.test"), timeout=POLL_TIMEOUT)
    assert r.status == 200 and r.body == b"ok", r
    doc = settled_status(proxy, 1)
    assert backend_entry(doc, "default", name)["requests"] == 1, doc["pools"]
    families = metrics(proxy)
    assert value(families, "rsp_backend_up", pool="default", backend=name) == 1
    assert value(families, "rsp_backend_requests_total", backend=name) == 1
    page = ask_status(proxy.status_port, "/").body.decode()
    assert f'data-backend="{name}"' in page, page


def test_generation_and_reloads(make_backend, start_proxy, rsp, tmp_path):
    """generation 1 at start; a good reload (backend b instead of a, a new
    site) makes it 2 with reloads.ok 1 and a later generation_loaded_at,
    and the pools and sites of the new config; a broken one (a bad
    setting) counts reloads.failed 1 and changes nothing else; another
    good one is generation 3. The status listener serves throughout, and
    /metrics agrees."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_with_status(start_proxy, a)
    doc = check_shape(status_json(proxy), proxy)
    assert (doc["generation"], doc["reloads"]) == (1, {"ok": 0, "failed": 0}), doc
    first_loaded = doc["generation_loaded_at"]
    assert get_ok(proxy, "x.test") == "a"

    rewrite_config(rsp, proxy, tmp_path, [b], sites={"new.test": [a]})
    sent_at = time.time()
    reload_and_wait(proxy, f"reloaded {config_path(proxy)}: generation 2")
    doc = check_shape(status_json(proxy), proxy)
    assert (doc["generation"], doc["reloads"]) == (2, {"ok": 1, "failed": 0}), doc
    assert doc["generation_loaded_at"] >= first_loaded, (first_loaded, doc["generation_loaded_at"])
    assert sent_at - 1 <= doc["generation_loaded_at"] <= time.time() + 1, (sent_at, doc["generation_loaded_at"])
    assert [x["name"] for x in pools_by_name(doc)["default"]["backends"]] == [name_of(b)], doc["pools"]
    assert set(sites_by_name(doc)) >= {"default", "new.test"}, doc["sites"]
    assert get_ok(proxy, "x.test") == "b"
    families = metrics(proxy)
    assert value(families, "rsp_config_generation") == 2
    assert value(families, "rsp_config_reloads_total", result="ok") == 1
    assert value(families, "rsp_config_reloads_total", result="failed") == 0

    rewrite_config(rsp, proxy, tmp_path, [a], keepalive_requests=-1)
    reload_and_wait(proxy, "reload failed")
    doc = check_shape(status_json(proxy), proxy)
    assert (doc["generation"], doc["reloads"]) == (2, {"ok": 1, "failed": 1}), doc
    assert [x["name"] for x in pools_by_name(doc)["default"]["backends"]] == [name_of(b)], doc["pools"]
    assert get_ok(proxy, "x.test") == "b"
    assert_metrics_match(metrics(proxy), settled_status(proxy, 3))

    rewrite_config(rsp, proxy, tmp_path, [a])
    reload_and_wait(proxy, f"reloaded {config_path(proxy)}: generation 3")
    doc = check_shape(status_json(proxy), proxy)
    assert (doc["generation"], doc["reloads"]) == (3, {"ok": 2, "failed": 1}), doc
    assert doc["requests_total"] == 3 and doc["started_at"] <= doc["generation_loaded_at"], doc
    assert_metrics_match(metrics(proxy), doc)


def test_counters_survive_a_reload(make_backend, start_proxy, rsp, tmp_path):
    """Counters never go down: after a reload whose config drops site
    a.test (which served two requests), requests_total and the classes
    keep them and still add up over the sites listed; /metrics agrees. A
    reload that brings a.test back goes on counting from there."""
    a = make_backend("a")
    proxy = start_with_status(start_proxy, a, sites={"a.test": [a]})
    for host in ("a.test", "a.test", "x.test"):
        assert get_ok(proxy, host) == "a"
    before = settled_status(proxy, 3)
    assert sites_by_name(before)["a.test"]["codes"] == {"200": 2}
    rewrite_config(rsp, proxy, tmp_path, [a])
    reload_and_wait(proxy, f"reloaded {config_path(proxy)}: generation 2")
    after = settled_status(proxy, 3)   # requests_total the sum over the sites listed (check_shape)
    assert after["requests_by_class"] == before["requests_by_class"], (before, after)
    rewrite_config(rsp, proxy, tmp_path, [a], sites={"a.test": [a]})
    reload_and_wait(proxy, f"reloaded {config_path(proxy)}: generation 3")
    assert get_ok(proxy, "a.test") == "a"
    doc = settled_status(proxy, 4)
    assert sites_by_name(doc)["a.test"]["codes"] == {"200": 3}, doc["sites"]
    assert value(metrics(proxy), "rsp_requests_total", site="a.test", code="200") == 3


def get_ok(proxy, host):
    """A GET /echo through the public listener; who answered (a 200)."""
    r = exchange(proxy.port, build_request(proxy.port, "GET", "/echo", host=host), timeout=POLL_TIMEOUT)
    assert r.status == 200, r
    return r.header("X-Backend")


@pytest.mark.stage(13)
def test_counters_add_up_across_workers(make_backend, start_proxy):
    """workers = 2, served by the master's status listener: 48 keep-alive
    connections opened one after another and held (the workers take turns
    on the shared socket, so both hold some: checked), two requests on
    each, then 20 requests on new connections; the master's /status.json
    and /metrics count exactly those 116 requests, per site and code and
    for the backend, and the 48 connections while they are held: the
    figures are every worker's together, not the master's own (it serves
    no client) nor one worker's."""
    a = make_backend("a")
    proxy = start_with_status(start_proxy, a, workers=2)
    pids = started_workers(proxy, 2)
    held, placed = [], collections.Counter()
    try:
        for n in range(48):
            conn = Conn(proxy.port, timeout=POLL_TIMEOUT)
            held.append(conn)
            for k in range(2):
                r = conn.get(f"/echo?n={n}&k={k}")
                assert r.status == 200, r
            placed.update(owners(conn.sock, proxy.port, pids))
        assert set(placed) == set(pids), f"the 48 connections all went to one worker: {dict(placed)}"
        doc = wait_status(proxy, lambda d: d["requests_total"] == 96 and d["connections"] == 48,
                          "96 requests and 48 connections")
        assert sorted(doc["workers"]["pids"]) == sorted(pids), doc["workers"]
    finally:
        for conn in held:
            conn.close()
    for n in range(20):
        assert get(proxy.port, f"/echo?fresh={n}").status == 200
    doc = settled_status(proxy, 116)
    assert sites_by_name(doc)["default"]["codes"] == {"200": 116}, doc["sites"]
    assert backend_entry(doc, "default", name_of(a))["requests"] == 116
    assert doc["connections"] == 0, doc["connections"]
    families = metrics(proxy)
    assert value(families, "rsp_requests_total", site="default", code="200") == 116
    assert value(families, "rsp_backend_requests_total", backend=name_of(a)) == 116
    assert value(families, "rsp_workers") == 2


def test_header_timeout_counted(backend, start_proxy):
    """A client that sends half a head gets rsp's 408 after header_timeout
    (0.5 s): timeouts.header is 1 (the other kinds 0), in /metrics too,
    and the 408 counts as a 4xx response; the backend saw nothing."""
    proxy = start_with_status(start_proxy, backend, header_timeout=0.5)
    r = exchange(proxy.port, b"GET /echo HTTP/1.1\r\nHost: x.test\r\nX-Half: ", timeout=POLL_TIMEOUT)
    assert r.status == 408, r
    doc = wait_status(proxy, lambda d: d["timeouts"]["header"] >= 1, "timeouts.header 1")
    check_shape(doc, proxy)
    assert doc["timeouts"] == {**dict.fromkeys(TIMEOUT_KINDS, 0), "header": 1}, doc["timeouts"]
    families = metrics(proxy)
    assert value(families, "rsp_timeouts_total", kind="header") == 1
    assert value(families, "rsp_timeouts_total", kind="connect") == 0
    assert backend.total_hits == 0
    assert doc["requests_by_class"]["4xx"] == 1 and doc["requests_total"] == 1, \
        f"the 408 (a response rsp sent) was not counted: {doc['requests_by_class']}, sites {doc['sites']}"
    assert sum(s["codes"].get("408", 0) for s in doc["sites"]) == 1, doc["sites"]


def test_backend_down_by_health_check(make_backend, start_proxy):
    """Active health checks: backend d whose /healthz answers 503 is
    marked down (its log line): status.json shows it up: false,
    active_health "down", passive "up", and a healthy one up; a pool with
    health_check = false shows "unchecked"; rsp_backend_up 0 and 1. Once
    d passes its checks again it is up again in both."""
    a, d, e = make_backend("a"), make_backend("d"), make_backend("e")
    d.health_status = 503
    proxy = start_with_status(start_proxy, a, d, health_check=CHECK,
                              pools={"app": {"backends": [e], "health_check": False}},
                              sites={"app.test": {"pool": "app"}})
    wait_for_log(proxy, f"backend {name_of(d)} is down: health check", HEALTH_TIMEOUT)
    doc = wait_status(proxy, lambda d_: not backend_entry(d_, "default", name_of(d))["up"], "d shown down")
    check_shape(doc, proxy)
    down = backend_entry(doc, "default", name_of(d))
    assert (down["up"], down["active_health"], down["passive_health"]) == (False, "down", "up"), down
    up = backend_entry(doc, "default", name_of(a))
    assert (up["up"], up["active_health"], up["passive_health"]) == (True, "up", "up"), up
    unchecked = backend_entry(doc, "app", name_of(e))
    assert (unchecked["up"], unchecked["active_health"]) == (True, "unchecked"), unchecked
    families = metrics(proxy)
    assert value(families, "rsp_backend_up", pool="default", backend=name_of(d)) == 0
    assert value(families, "rsp_backend_up", pool="default", backend=name_of(a)) == 1
    assert value(families, "rsp_backend_up", pool="app", backend=name_of(e)) == 1
    assert_metrics_match(families, doc)
    for i in range(4):
        assert get_ok(proxy, "x.test") == "a"
    assert d.requests == 0
    assert backend_entry(settled_status(proxy, 4), "default", name_of(a))["requests"] == 4

    d.health_status = 200
    wait_for_log(proxy, f"backend {name_of(d)} is up: health check", HEALTH_TIMEOUT)
    doc = wait_status(proxy, lambda d_: backend_entry(d_, "default", name_of(d))["up"], "d shown up again")
    back = backend_entry(doc, "default", name_of(d))
    assert (back["up"], back["active_health"], back["passive_health"]) == (True, "up", "up"), back
    assert value(metrics(proxy), "rsp_backend_up", pool="default", backend=name_of(d)) == 1


def test_backend_down_by_refused_connect(make_backend, start_proxy):
    """Passive health: a backend whose port refuses is marked down by the
    first request that tries it (which fails over to the other, so all
    four requests get a 200 from a): status.json shows it up: false,
    passive_health "down", active_health "unchecked", one failure; a
    serves the four; rsp_backend_up 0 for it."""
    a = make_backend("a")
    (port,) = closed_ports(1)
    dead = (LOOPBACK, port)
    proxy = start_with_status(start_proxy, a, dead, down_time=60)
    for _ in range(4):
        assert get_ok(proxy, "x.test") == "a"
    wait_for_log(proxy, went_down(LOOPBACK, port), POLL_TIMEOUT)
    doc = settled_status(proxy, 4)
    entry = backend_entry(doc, "default", name_of(dead))
    assert (entry["up"], entry["passive_health"], entry["active_health"]) == (False, "down", "unchecked"), entry
    assert entry["failures"] == 1 and entry["in_flight"] == 0, entry
    ok = backend_entry(doc, "default", name_of(a))
    assert (ok["up"], ok["requests"], ok["failures"]) == (True, 4, 0), ok
    assert doc["requests_by_class"]["2xx"] == 4 and sites_by_name(doc)["default"]["codes"] == {"200": 4}, doc
    assert value(metrics(proxy), "rsp_backend_up", pool="default", backend=name_of(dead)) == 0


# -- /metrics ---------------------------------------------------------------------------------

def test_metrics_families(make_backend, start_proxy):
    """/metrics: the content type of format 0.0.4; HELP and TYPE for every
    family, before its samples (the parser checks); every family of the
    spec with its type and labels; one rsp_backend_up per backend of
    every pool (a backend in two pools twice, one
    rsp_backend_requests_total for it); bytes in and out, the five
    timeout kinds and both reload results always; one rsp_requests_total
    per (site, code) seen; values as status.json says."""
    a, b, shared = make_backend("a"), make_backend("b"), make_backend("shared")
    proxy = start_with_status(start_proxy, a, shared, sites={"b.test": [b, shared]})
    traffic = Traffic(proxy.port)
    assert traffic.get("/echo", "b.test").status == 200
    assert traffic.get("/nope", "b.test").status == 404
    assert traffic.get("/echo", "a.test").status == 200
    doc = settled_status(proxy, 3)
    families = metrics(proxy)
    expected = families_expected()
    assert set(families) >= set(expected), f"missing: {sorted(set(expected) - set(families))}"
    for name in ("rsp_connections", "rsp_requests_in_flight", "rsp_config_generation", "rsp_start_time_seconds") + \
            (WORKER_FAMILIES if has_workers() else ()):
        assert len(families[name]["samples"]) == 1, f"{name}: {families[name]['samples']}"
    assert {l["direction"] for l, _ in samples(families, "rsp_bytes_total")} == {"in", "out"}
    assert {l["kind"] for l, _ in samples(families, "rsp_timeouts_total")} == set(TIMEOUT_KINDS)
    assert {l["result"] for l, _ in samples(families, "rsp_config_reloads_total")} == {"ok", "failed"}
    assert sorted((l["pool"], l["backend"]) for l, _ in samples(families, "rsp_backend_up")) == sorted(
        [("default", name_of(a)), ("default", name_of(shared)), ("b.test", name_of(b)),
         ("b.test", name_of(shared))])
    assert sorted(l["backend"] for l, _ in samples(families, "rsp_backend_requests_total")) == sorted(
        [name_of(a), name_of(b), name_of(shared)])
    assert sum(v for _, v in samples(families, "rsp_backend_requests_total")) == 3
    assert sum(v for _, v in samples(families, "rsp_requests_total")) == 3
    assert value(families, "rsp_requests_total", site="b.test", code="404") == 1
    if has_workers():
        assert value(families, "rsp_workers") == 1 and value(families, "rsp_worker_restarts_total") == 0
    assert value(families, "rsp_config_generation") == 1
    assert_metrics_match(families, doc)


# -- the public listener -----------------------------------------------------------------------

def test_public_listener_forwards_status_paths(make_keepalive_backend, start_proxy):
    """Through the public listener, /metrics, /status.json and / are
    ordinary paths: the backend answers them (its answer names the path);
    they are counted as requests like any other."""
    ka = make_keepalive_backend("ka")
    proxy = start_with_status(start_proxy, ka)
    for path in ("/metrics", "/status.json", "/", "/metrics?x=1"):
        r = exchange(proxy.port, build_request(proxy.port, "GET", path, host="x.test"), timeout=POLL_TIMEOUT)
        assert r.status == 200 and r.header("X-Backend") == "ka", r
        assert r.body == f"path={path}\n".encode(), r.body[:200]
    assert [rec.target for rec in ka.records] == ["/metrics", "/status.json", "/", "/metrics?x=1"]
    doc = settled_status(proxy, 4)
    assert sites_by_name(doc)["default"]["codes"] == {"200": 4}


def test_status_listener_is_its_own_socket(backend, start_proxy):
    """Without status_listen rsp listens on its public port only; with it,
    on that port too, and the status port serves no proxied traffic."""
    plain = start_proxy(backend)
    assert listening_ports(plain.pid) == [plain.port]
    proxy = start_with_status(start_proxy, backend)
    assert listening_ports(proxy.pid) == sorted([proxy.port, proxy.status_port])
    r = ask_status(proxy.status_port, "/echo")
    assert_status_answer(r, 404)
    assert backend.total_hits == 0


# -- the status listener's HTTP ----------------------------------------------------------------

@pytest.mark.parametrize("path, content_type", [("/status.json", "application/json"),
                                                ("/metrics", METRICS_TYPE),
                                                ("/", "text/html; charset=utf-8")])
def test_status_paths_get_and_head(backend, start_proxy, path, content_type):
    """GET of each path: 200 with its content type, Content-Length,
    Cache-Control: no-store and Connection: close, then the close (the
    request, HTTP/1.1 without Connection: close, asked for none); HEAD:
    the same head, without a body; HTTP/1.0 works too."""
    proxy = start_with_status(start_proxy, backend)
    r = ask_status(proxy.status_port, path)
    assert_status_answer(r, 200, content_type)
    assert int(r.header("Content-Length")) > 0
    r = ask_status(proxy.status_port, f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert_status_answer(r, 200, content_type, head=True)
    assert int(r.header("Content-Length")) > 0
    r = ask_status(proxy.status_port, f"GET {path} HTTP/1.0\r\n\r\n".encode())
    assert_status_answer(r, 200, content_type)


def test_status_listener_one_answer_per_connection(backend, start_proxy):
    """Two requests pipelined on one connection get one answer (exactly
    its Content-Length of body), then the close."""
    proxy = start_with_status(start_proxy, backend)
    one = f"GET /metrics HTTP/1.1\r\nHost: {LOOPBACK}\r\n\r\n".encode()
    r = ask_status(proxy.status_port, one + one)
    assert_status_answer(r, 200, METRICS_TYPE)
    assert r.raw.count(b"HTTP/1.") == 1, r.raw[:500]


@pytest.mark.parametrize("path", ["/nope", "/status", "/metrics/", "/index.html", "/status.json/x", "//"])
def test_status_listener_unknown_path(backend, start_proxy, path):
    """Any other path: 404 (with Connection: close and the rest); a HEAD of
    it a 404 without a body."""
    proxy = start_with_status(start_proxy, backend)
    assert_status_answer(ask_status(proxy.status_port, path), 404)
    r = ask_status(proxy.status_port, f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert_status_answer(r, 404, head=True)
    assert backend.total_hits == 0


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_status_listener_other_methods(backend, start_proxy, method):
    """A method other than GET and HEAD: 405 with Allow: GET, HEAD."""
    proxy = start_with_status(start_proxy, backend)
    body = b"x=1"
    for path in ("/status.json", "/metrics", "/"):
        data = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        r = ask_status(proxy.status_port, data)
        assert_status_answer(r, 405)
        assert r.header("Allow") == "GET, HEAD", r.headers


BAD_REQUESTS = [
    ("one-word", b"GARBAGE\r\n\r\n"),
    ("method-only", b"GET\r\n\r\n"),
    ("four-words", b"GET /metrics HTTP/1.1 extra\r\n\r\n"),
    ("bad-version", b"GET /metrics JUNK/1.1\r\n\r\n"),
    ("bad-minor-version", b"GET /metrics HTTP/1.x\r\n\r\n"),
    ("request-line-on-two-lines", b"GET\r\n/metrics HTTP/1.1\r\n\r\n"),
    ("header-without-colon", b"GET /metrics HTTP/1.1\r\nNo colon here\r\n\r\n"),
    ("nul-in-target", b"GET /met\x00rics HTTP/1.1\r\nHost: x\r\n\r\n"),
]


@pytest.mark.parametrize("data", [b[1] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS])
def test_status_listener_bad_request(backend, start_proxy, data):
    """A malformed request (a whole head, the connection left open): a 400
    (with Connection: close and the rest), at once, not after a wait."""
    proxy = start_with_status(start_proxy, backend)
    assert_status_answer(ask_status(proxy.status_port, data), 400)
    assert_status_answer(ask_status(proxy.status_port, "/status.json"), 200, "application/json")


def test_silent_status_clients_do_not_block(backend, start_proxy):
    """Clients that connect to the status listener and send nothing, or
    half a request, do not keep others from being answered (each within a
    bound), and rsp goes on proxying meanwhile."""
    proxy = start_with_status(start_proxy, backend)
    idle = [connect(proxy.status_port) for _ in range(3)]
    half = connect(proxy.status_port)
    half.sendall(b"GET /status.json HTTP/1.1\r\nHost: x\r\n")
    try:
        for path in ("/status.json", "/metrics", "/"):
            assert ask_status(proxy.status_port, path, timeout=POLL_TIMEOUT).status == 200
        assert get_ok(proxy, "x.test") == "a"
        doc = status_json(proxy)
        assert doc["connections"] == 0, "status clients counted as client connections"
    finally:
        for s in idle + [half]:
            s.close()
    assert_status_answer(ask_status(proxy.status_port, "/status.json"), 200, "application/json")


def test_many_status_clients_at_once(backend, start_proxy):
    """Twenty clients asking at the same time each get a whole answer."""
    proxy = start_with_status(start_proxy, backend)
    paths = ["/status.json", "/metrics", "/", "/nope"] * 5
    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(lambda p: ask_status(proxy.status_port, p, timeout=POLL_TIMEOUT * 2), paths))
    for path, r in zip(paths, answers):
        assert_status_answer(r, 404 if path == "/nope" else 200)
    json.loads(answers[0].body)
    parse_metrics(answers[1].body.decode())


def send_hostile(port, data):
    """Sends `data` (rsp may close or reset before it is all sent), then
    the end of the stream (a half-close), and reads whatever comes until
    the connection ends (bounded); the Response."""
    with connect(port, timeout=POLL_TIMEOUT) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # the end of it: rsp need not wait for more
        except OSError:
            pass  # rsp closed or reset the connection first (EPIPE, ECONNRESET, ENOTCONN)
        try:
            raw, reset = read_to_eof(sock)
        except ConnectionResetError:
            raw, reset = b"", True
        except TimeoutError as e:
            pytest.fail(f"the status listener neither answered nor closed: {e}")
    return Response(raw, reset)


HOSTILE = [
    ("garbage-1000-bytes", random.Random(1011).randbytes(1000)),
    ("garbage-lines", b"\r\n".join(random.Random(7).randbytes(30) for _ in range(30)) + b"\r\n\r\n"),
    ("huge-request-line", b"GET /" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("huge-head", b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"c" * 100) for i in range(3000))
     + b"\r\n"),
    ("nul-bytes", b"GET /metrics\x00 HTTP/1.1\r\nHost: \x00\r\n\r\n"),
    ("bare-newlines", b"GET /metrics HTTP/1.1\nHost: x\n\n" * 3),
]


@pytest.mark.parametrize("data", [h[1] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_status_listener_hostile_input(backend, start_proxy, data):
    """Garbage, an enormous request line or head, NUL bytes, bare LFs: a
    4xx or a close (never a 2xx for garbage, never a hang); rsp keeps
    serving status and proxied requests, and holds no more fds after
    (the teardown check)."""
    proxy = start_with_status(start_proxy, backend)
    r = send_hostile(proxy.status_port, data)
    if r.status is not None and data.startswith(b"GET /metrics HTTP/1.1\n"):
        assert r.status in (200, 400), r  # bare LFs: tolerated (RFC 9112 2.2) or refused
    else:
        assert r.status is None or 400 <= r.status < 500, f"{r!r}: {r.raw[:300]!r}"
        assert r.status is not None or r.raw == b"", f"not an HTTP answer: {r.raw[:300]!r}"
    assert proxy.alive(), proxy.describe()
    assert_status_answer(ask_status(proxy.status_port, "/status.json"), 200, "application/json")
    assert get_ok(proxy, "x.test") == "a"
    assert status_json(proxy)["requests_total"] == 1


# -- the settings --------------------------------------------------------------------------------

B = (LOOPBACK, 1)  # a backend nothing has to answer at: these configs never serve


def write_config(rsp, tmp_path, listen_port, options):
    (path,) = proxy_arguments(rsp.stage, listen_port, [B], str(tmp_path), options)
    return path


LISTEN_PORT = 18080   # written into the configs of -t checks only: never bound

# (id, options, the setting the error names, words the line must hold)
STATUS_ERRORS = [
    ("any-address", {"status_listen": "0.0.0.0:9090"}, "status_listen", ("loopback", "status_public")),
    ("documentation-address", {"status_listen": "192.0.2.1:9090"}, "status_listen", ("loopback", "status_public")),
    ("private-address", {"status_listen": "10.1.2.3:9090"}, "status_listen", ("loopback", "status_public")),
    ("ipv6-any", {"status_listen": "[::]:9090"}, "status_listen", ("loopback", "status_public")),
    ("not-public", {"status_listen": "0.0.0.0:9090", "status_public": False}, "status_listen",
     ("loopback", "status_public")),
    ("same-as-listen", {"status_listen": f"{LOOPBACK}:{LISTEN_PORT}"}, "status_listen", ()),
    ("same-port-as-listen", {"status_listen": LISTEN_PORT}, "status_listen", ()),
    ("same-port-string", {"status_listen": str(LISTEN_PORT)}, "status_listen", ()),
    ("port-too-big", {"status_listen": f"{LOOPBACK}:70000"}, "status_listen", ()),
    ("port-number-too-big", {"status_listen": 65536}, "status_listen", ()),
    ("port-negative", {"status_listen": -1}, "status_listen", ()),
    ("port-fraction", {"status_listen": 9090.5}, "status_listen", ()),
    ("port-not-a-number", {"status_listen": f"{LOOPBACK}:abc"}, "status_listen", ()),
    ("port-missing", {"status_listen": f"{LOOPBACK}:"}, "status_listen", ()),
    ("empty", {"status_listen": ""}, "status_listen", ()),
    ("boolean", {"status_listen": True}, "status_listen", ()),
    ("table", {"status_listen": [9090]}, "status_listen", ()),
    ("status_public-string", {"status_listen": "127.0.0.1:9090", "status_public": "yes"}, "status_public", ()),
    ("status_public-number", {"status_public": 1}, "status_public", ()),
    ("workers-0", {"workers": 0}, "workers", ()),
    ("workers-65", {"workers": 65}, "workers", ()),
    ("workers-fraction", {"workers": 1.5}, "workers", ()),
    ("workers-word", {"workers": "two"}, "workers", ()),
    ("workers-negative", {"workers": -1}, "workers", ()),
    ("workers-boolean", {"workers": True}, "workers", ()),
    ("workers-numeric-string", {"workers": "2"}, "workers", ()),
    ("reuseport-string", {"reuseport": "yes"}, "reuseport", ()),
]


def staged(entries):
    """pytest params of (id, options, ...) entries: those setting workers or
    reuseport apply from stage 13, the others from stage 12."""
    return [pytest.param(*e[1:], id=e[0],
                         marks=pytest.mark.stage(WORKERS_STAGE) if set(e[1]) & {"workers", "reuseport"} else ())
            for e in entries]


@pytest.mark.parametrize("options, setting, words", staged(STATUS_ERRORS))
def test_bad_status_setting(rsp, tmp_path, options, setting, words):
    """A bad setting of stage 12 (or 13): rsp -t exits 1 with one line naming the file
    and the setting in quotes (for a non-loopback status_listen, saying it
    is not a loopback address and naming status_public); a start gives
    the very same line."""
    path = write_config(rsp, tmp_path, LISTEN_PORT, options)
    line = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, setting, words=words, status=1)
    if setting == "status_listen" and "loopback" in words:
        assert "not a loopback" in line, line
    started = run_rsp(rsp, [path], tmp_path)
    assert started.returncode == 1, f"exit status {started.returncode}, stderr: {started.stderr!r}"
    assert started.stderr.splitlines() == [line], f"rsp -t said {line!r}, a start said {started.stderr!r}"


GOOD_SETTINGS = [
    ("port-number", {"status_listen": 9090}),
    ("port-string", {"status_listen": "9090"}),
    ("loopback", {"status_listen": "127.0.0.1:9090"}),
    ("loopback-8", {"status_listen": "127.0.0.2:9090"}),
    ("localhost", {"status_listen": "localhost:9090"}),
    ("ipv6-loopback", {"status_listen": "[::1]:9090"}),
    ("public-any", {"status_listen": "0.0.0.0:9090", "status_public": True}),
    ("public-address", {"status_listen": "192.0.2.1:9090", "status_public": True}),
    ("loopback-not-public", {"status_listen": "127.0.0.1:9090", "status_public": False}),
    ("workers-auto", {"workers": "auto"}),
    ("workers-1", {"workers": 1}),
    ("workers-64", {"workers": 64}),
    ("workers-8-reuseport", {"workers": 8, "reuseport": True}),
    ("reuseport-false", {"reuseport": False}),
]


@pytest.mark.parametrize("options", staged(GOOD_SETTINGS))
def test_good_status_setting(rsp, tmp_path, options):
    """Each form the spec allows passes rsp -t ("rsp: PATH: ok")."""
    path = write_config(rsp, tmp_path, LISTEN_PORT, options)
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout


def test_status_public_serves_on_any_address(backend, start_proxy):
    """status_listen = "0.0.0.0:PORT" with status_public = true starts and
    serves (here, on 127.0.0.1)."""
    port = free_port()
    proxy = start_proxy(backend, status_listen=f"0.0.0.0:{port}", status_public=True)
    wait_until_listening(port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = port
    doc = check_shape(status_json(proxy), proxy)
    assert doc["requests_total"] == 0


@pytest.mark.parametrize("form", ["number", "string"])
def test_status_listen_port_alone(backend, start_proxy, form):
    """status_listen as a port alone (a number or a string) listens on
    127.0.0.1."""
    port = free_port()
    proxy = start_proxy(backend, status_listen=port if form == "number" else str(port))
    wait_until_listening(port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = port
    check_shape(status_json(proxy), proxy)


@needs_ipv6
def test_status_listen_ipv6_loopback(backend, start_proxy):
    """status_listen = "[::1]:PORT" serves on ::1."""
    port = free_port()
    proxy = start_proxy(backend, status_listen=f"[::1]:{port}")
    wait_until_listening(port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    r = ask_status(port, f"GET /status.json HTTP/1.1\r\nHost: [::1]:{port}\r\n\r\n".encode(), address="::1")
    assert_status_answer(r, 200, "application/json")
    assert json.loads(r.body)["version"] == version_of(proxy)


# -- the HTML page ----------------------------------------------------------------------------------

class PageParser(html.parser.HTMLParser):
    """What the tests look at in the page: every start tag with its
    attributes, the text outside script and style, the text of style
    elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []       # (tag, {attr: value})
        self.text = []
        self.styles = []
        self._in = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: (v or "") for k, v in attrs}))
        if tag in ("script", "style"):
            self._in.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, {k: (v or "") for k, v in attrs}))

    def handle_endtag(self, tag):
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        if not self._in:
            self.text.append(data)
        elif self._in[-1] == "style":
            self.styles.append(data)


def start_for_page(make_backend, start_proxy):
    """rsp with: default backends a (healthy) and d (its checks fail: down),
    site www.example.test with its own backend c, site app.test on pool
    "app" (backend e, unchecked); waits until d is marked down. Returns
    (proxy, {backend name: expected state})."""
    a, c, d, e = (make_backend(n) for n in "acde")
    d.health_status = 503
    proxy = start_with_status(start_proxy, a, d, health_check=CHECK,
                              sites={"www.example.test": {"backends": [c], "health_check": False},
                                     "app.test": {"pool": "app"}},
                              pools={"app": {"backends": [e], "health_check": False}})
    wait_for_log(proxy, f"backend {name_of(d)} is down: health check", HEALTH_TIMEOUT)
    wait_status(proxy, lambda doc: not backend_entry(doc, "default", name_of(d))["up"], "d shown down")
    return proxy, {name_of(a): "up", name_of(c): "up", name_of(d): "down", name_of(e): "up"}


EXTERNAL = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)   # http://, https://, //host


def test_status_page_structure(make_backend, start_proxy):
    """GET /: a UTF-8 HTML page with a viewport meta and a 5 s refresh;
    every backend of the config in an element of class "backend" with
    data-backend="HOST:PORT" and data-state (the down one "down", the
    others "up"), and no other; the pools' and sites' names; the status
    classes, the timeout kinds, connections and generation by name (how
    bytes and uptime are labelled is the page's business);
    an inline <svg id="rps">; nothing loaded from elsewhere (no src or
    href to another host, no script src, no stylesheet link, no @import
    or url() to another host in styles)."""
    proxy, states = start_for_page(make_backend, start_proxy)
    r = ask_status(proxy.status_port, "/")
    assert_status_answer(r, 200, "text/html; charset=utf-8")
    page = PageParser()
    page.feed(r.body.decode("utf-8"))
    page.close()
    tags = page.tags

    metas = [attrs for tag, attrs in tags if tag == "meta"]
    assert any(m.get("name", "").lower() == "viewport" and m.get("content") for m in metas), metas
    assert any(m.get("http-equiv", "").lower() == "refresh" and m.get("content", "").strip() == "5"
               for m in metas), metas

    backends = [attrs for _, attrs in tags if "data-backend" in attrs]
    assert backends, "no element with data-backend"
    for attrs in backends:
        assert "backend" in attrs.get("class", "").split(), f"data-backend without class backend: {attrs}"
        assert attrs.get("data-state") in ("up", "down"), attrs
    assert {attrs["data-backend"] for attrs in backends} == set(states), \
        f"backends on the page: {sorted({a['data-backend'] for a in backends})}, in the config: {sorted(states)}"
    for attrs in backends:
        assert attrs["data-state"] == states[attrs["data-backend"]], \
            f"{attrs['data-backend']} shown {attrs['data-state']}, it is {states[attrs['data-backend']]}"

    svgs = [attrs for tag, attrs in tags if tag == "svg"]
    assert any(s.get("id") == "rps" for s in svgs), f"no <svg id=\"rps\">: {svgs}"

    text = " ".join(page.text)
    lowered = text.lower()
    for name in ("default", "app", "www.example.test", "app.test"):
        assert name in text, f"pool or site {name!r} not on the page"
    for word in CLASSES + TIMEOUT_KINDS + ("connections", "generation"):
        assert word in lowered, f"{word!r} not on the page"

    for tag, attrs in tags:
        for attr in ("src", "href", "srcset", "action", "formaction", "poster", "data", "xlink:href", "background"):
            if attr in attrs:
                assert not EXTERNAL.match(attrs[attr]), f"<{tag} {attr}={attrs[attr]!r}> loads from elsewhere"
        assert not (tag == "script" and "src" in attrs), f"an external script: {attrs}"
        assert not (tag == "link" and "stylesheet" in attrs.get("rel", "").lower().split()), \
            f"an external stylesheet: {attrs}"
        if tag in ("img", "iframe", "embed", "object", "audio", "video", "source"):
            for attr in ("src", "data"):
                assert attr not in attrs or attrs[attr].startswith("data:"), f"<{tag}> loads {attrs[attr]!r}"
    styles = " ".join(page.styles) + " ".join(attrs.get("style", "") for _, attrs in tags)
    assert "@import" not in styles, "a style imports another stylesheet"
    for url in re.findall(r"url\(\s*['\"]?([^'\")]*)", styles):
        assert url.startswith(("data:", "#")), f"a style loads {url!r}"


def browser_or_skip():
    """The paths of chromium and chromedriver, and selenium's webdriver
    module; skips the test if any is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None or importlib.util.find_spec("selenium") is None:
        missing = [n for n, found in (("chromium", chromium), ("chromedriver", driver),
                                      ("python3-selenium", importlib.util.find_spec("selenium"))) if not found]
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver "
                    "python3-selenium; ./setup-env.sh installs them)")
    return chromium, driver


# The look of an element and everything in it, with its backend name taken out
# of its text: an up and a down backend must not look the same.
LOOK_SCRIPT = """
const el = arguments[0], name = arguments[1];
const parts = [el.innerText.split(name).join('')];
for (const node of [el, ...el.querySelectorAll('*')]) {
  const s = getComputedStyle(node);
  parts.push([s.color, s.backgroundColor, s.borderTopColor, s.borderLeftColor, s.opacity,
              s.textDecorationLine, s.fill, s.stroke, s.visibility,
              getComputedStyle(node, '::before').content, getComputedStyle(node, '::before').backgroundColor,
              getComputedStyle(node, '::after').content].join('|'));
}
return parts.join('\\n');
"""


def test_status_page_in_a_browser(make_backend, start_proxy, tmp_path):
    """Headless Chromium (driven by selenium) loads the page from the
    status listener: it finds every backend through the DOM
    (.backend[data-backend]), each displayed, with its state (the down one
    "down" and looking different from an up one); the SVG #rps is
    displayed with a non-zero size; every resource the page loaded came
    from the status listener; no error in the console (but a missing
    favicon). The screenshot is kept in tmp_path (and copied to
    test-results/status-page.png if that directory exists)."""
    chromium, chromedriver = browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    proxy, states = start_for_page(make_backend, start_proxy)
    origin = f"http://{LOOPBACK}:{proxy.status_port}"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--window-size=1280,1000",
                f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-', dir=tmp_path)}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(chromedriver, log_path=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(15)
        driver.set_script_timeout(5)
        driver.get(origin + "/")
        elements = driver.find_elements(By.CSS_SELECTOR, ".backend[data-backend]")
        found = {}
        for el in elements:
            name = el.get_attribute("data-backend")
            found.setdefault(name, []).append(el)
            assert el.is_displayed(), f"backend {name} is not displayed"
            assert el.size["width"] > 0 and el.size["height"] > 0, f"backend {name}: size {el.size}"
            assert el.get_attribute("data-state") == states.get(name), \
                f"{name}: data-state {el.get_attribute('data-state')!r}, expected {states.get(name)!r}"
        assert set(found) == set(states), f"the browser found {sorted(found)}, the config has {sorted(states)}"
        down_name = next(n for n, s in states.items() if s == "down")
        up_name = next(n for n, s in states.items() if s == "up")
        down_look = driver.execute_script(LOOK_SCRIPT, found[down_name][0], down_name)
        up_look = driver.execute_script(LOOK_SCRIPT, found[up_name][0], up_name)
        assert down_look != up_look, f"a down backend looks like an up one:\n{down_look}"

        svg = driver.find_element(By.CSS_SELECTOR, "svg#rps")
        assert svg.is_displayed(), "the svg #rps is not displayed"
        assert svg.size["width"] > 0 and svg.size["height"] > 0, f"the svg #rps has size {svg.size}"

        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        foreign = [u for u in resources if not (u.startswith(origin + "/") or u.startswith("data:"))]
        assert not foreign, f"the page loaded resources from elsewhere: {foreign}"
        errors = [e for e in driver.get_log("browser")
                  if e.get("level") == "SEVERE" and "favicon.ico" not in e.get("message", "")]
        assert not errors, f"errors in the browser console: {errors}"

        # the whole page in the screenshot: a window as tall as the page (up to a bound)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1280, max(600, min(int(height) + 150, 4000)))
        shot = tmp_path / "status-page.png"
        assert driver.save_screenshot(str(shot)), "the screenshot failed"
    finally:
        driver.quit()
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000, f"not a PNG screenshot ({len(data)} bytes)"
    results = os.path.join(REPO, "test-results")
    if os.path.isdir(results):
        shutil.copyfile(shot, os.path.join(results, "status-page.png"))
