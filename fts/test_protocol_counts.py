"""Requests by protocol and the HTTP/2 settings (stage 20), the parts that
need no HTTP/2 client: status.json's "requests_by_protocol" ({"http1": N,
"http2": N}, adding up to requests_total) and "http2" ({"connections": N,
"streams": N}, open now); /metrics' rsp_requests_by_protocol_total
{protocol}, rsp_http2_connections and rsp_http2_streams, read with
Prometheus's own parser (python3-prometheus-client); the status page's
tiles; the counts kept whole when a worker dies. Every request here comes
over HTTP/1.1 (plain, and over TLS offering only http/1.1 in ALPN), so
http1 is every request and the HTTP/2 figures stay 0; test_http2.py counts
HTTP/2 streams.

The settings: `http2_max_streams` a whole number from 1 to 1024 (128 by
default), `tls.http2` true or false; anything else is refused with one
line naming the setting, and a misspelling of either is pointed out as
rsp's other settings' are.
"""

import os
import signal

import pytest

from checks import assert_config_error, wait_for_log
from client import Conn, get
from netutil import LOOPBACK
from proxy import proxy_arguments, run_rsp
from test_status import _note_stage  # noqa: F401 (autouse: test_status's helpers ask the stage under test)
from test_status import (POLL_TIMEOUT, PageParser, Traffic, ask_status, assert_status_answer, settled_status,
                         start_with_status, status_json)
from test_tls import WWW, ca, certs, start_tls  # noqa: F401 (fixtures)
from test_workers import started_workers
from tlsutil import TLSConn

prometheus_parser = pytest.importorskip(
    "prometheus_client.parser", reason="python3-prometheus-client is not installed (./setup-env.sh installs it)")

pytestmark = pytest.mark.stage(20)

CONFIG_PORT = 18080      # written into configs that rsp -t only reads: never bound
CONFIG_TLS_PORT = 18443
NO_HTTP2 = {"connections": 0, "streams": 0}


def read_metrics(proxy):
    """GET /metrics, parsed by prometheus_client: {family name: family}."""
    r = ask_status(proxy.status_port, "/metrics")
    assert_status_answer(r, 200)
    text = r.body.decode("utf-8")
    try:
        return {f.name: f for f in prometheus_parser.text_string_to_metric_families(text)}
    except ValueError as e:
        pytest.fail(f"prometheus_client cannot read /metrics: {e}\n{text}")


def protocol_samples(families):
    """rsp_requests_by_protocol_total as {protocol: value}, checked to be a
    counter with HELP whose every sample has the one label `protocol`.
    (prometheus_client names a counter family without its _total.)"""
    family = families.get("rsp_requests_by_protocol")
    assert family is not None, f"/metrics has no rsp_requests_by_protocol_total: {sorted(families)}"
    assert family.type == "counter", f"rsp_requests_by_protocol_total is a {family.type}"
    assert family.documentation, "rsp_requests_by_protocol_total has no HELP"
    found = {}
    for s in family.samples:
        if s.name.endswith("_created"):
            continue
        assert s.name == "rsp_requests_by_protocol_total" and set(s.labels) == {"protocol"}, s
        found[s.labels["protocol"]] = s.value
    return found


def gauge(families, name):
    """The one value of gauge family `name` (checked: a gauge, with HELP,
    one sample without labels)."""
    family = families.get(name)
    assert family is not None, f"/metrics has no {name}: {sorted(families)}"
    assert family.type == "gauge" and family.documentation, (name, family.type, family.documentation)
    assert len(family.samples) == 1 and not family.samples[0].labels, family.samples
    return family.samples[0].value


def http11_context(issuer):
    """A client context offering only http/1.1 in ALPN."""
    return issuer.client_context(alpn=["http/1.1"])


# -- counting -----------------------------------------------------------------------------------

def test_http1_requests_counted_by_protocol(make_backend, start_proxy, ca, certs):  # noqa: F811
    """Two requests on one plain keep-alive connection, a 404 from the
    backend, rsp's own 400 (no Host) and two on one TLS connection
    offering http/1.1: status.json says requests_by_protocol {"http1": 6,
    "http2": 0}, equal to requests_total, and http2 {"connections": 0,
    "streams": 0}; /metrics (prometheus_client) the same, as a counter and
    two gauges; while the TLS connection is held, it counts as a
    connection and not as an HTTP/2 one."""
    a = make_backend("a")
    proxy = start_with_status(lambda *b, **o: start_tls(start_proxy, *b, certificates=[certs.www], **o), a)
    with Conn(proxy.port, timeout=POLL_TIMEOUT) as c:
        for n in range(2):
            assert c.get(f"/echo?n={n}").status == 200
    traffic = Traffic(proxy.port)
    assert traffic.get("/nope", "a.test").status == 404
    assert traffic.send(b"GET / HTTP/1.1\r\n\r\n").status == 400
    with TLSConn(proxy.tls_port, http11_context(ca), WWW, timeout=POLL_TIMEOUT) as tls:
        for n in range(2):
            assert tls.get(f"/echo?tls={n}").status == 200
        doc = status_json(proxy)
        assert doc["connections"] == 1 and doc["http2"] == NO_HTTP2, (doc["connections"], doc["http2"])
    doc = settled_status(proxy, 6)
    assert doc["requests_by_protocol"] == {"http1": 6, "http2": 0}, doc["requests_by_protocol"]
    assert doc["http2"] == NO_HTTP2, doc["http2"]
    families = read_metrics(proxy)
    assert protocol_samples(families) == {"http1": 6, "http2": 0}
    assert gauge(families, "rsp_http2_connections") == 0
    assert gauge(families, "rsp_http2_streams") == 0


@pytest.mark.parametrize("kill", [False, True], ids=["workers", "worker-killed"])
def test_protocol_counts_add_up_across_workers(make_backend, start_proxy, kill):
    """workers = 2: 10 requests on new connections, counted by the
    master's status.json as http1 10; with kill, worker 1 is then killed
    (SIGKILL) and replaced: its counts stay (still 10, none lost), and 10
    more make 20 (none twice); the HTTP/2 gauges stay 0."""
    a = make_backend("a")
    proxy = start_with_status(start_proxy, a, workers=2)
    first, _ = started_workers(proxy, 2)
    for n in range(10):
        assert get(proxy.port, f"/echo?n={n}", timeout=POLL_TIMEOUT).status == 200
    doc = settled_status(proxy, 10)
    assert doc["requests_by_protocol"] == {"http1": 10, "http2": 0}, doc["requests_by_protocol"]
    if kill:
        os.kill(first, signal.SIGKILL)
        wait_for_log(proxy, f"worker 1 (pid {first}) was killed by signal 9; starting another", POLL_TIMEOUT)
        doc = settled_status(proxy, 10)
        assert doc["requests_by_protocol"] == {"http1": 10, "http2": 0}, \
            f"a dead worker's counts changed: {doc['requests_by_protocol']}"
    for n in range(10):
        assert get(proxy.port, f"/echo?again={n}", timeout=POLL_TIMEOUT).status == 200
    doc = settled_status(proxy, 20)
    assert doc["requests_by_protocol"] == {"http1": 20, "http2": 0}, doc["requests_by_protocol"]
    assert doc["http2"] == NO_HTTP2, doc["http2"]


def test_status_page_shows_protocols(make_backend, start_proxy):
    """The status page's traffic tiles give the requests over HTTP/1.x
    (3) and over HTTP/2 (0), and the open HTTP/2 connections and streams
    (0), each number just before its label."""
    a = make_backend("a")
    proxy = start_with_status(start_proxy, a)
    for n in range(3):
        assert get(proxy.port, f"/echo?n={n}", timeout=POLL_TIMEOUT).status == 200
    settled_status(proxy, 3)
    r = ask_status(proxy.status_port, "/")
    assert_status_answer(r, 200, "text/html; charset=utf-8")
    page = PageParser()
    page.feed(r.body.decode("utf-8"))
    page.close()
    text = [t.strip() for t in page.text if t.strip()]
    for label, want in (("over HTTP/1.x", "3"), ("over HTTP/2", "0"), ("HTTP/2 connections", "0"),
                        ("HTTP/2 streams", "0")):
        assert label in text, f"no tile {label!r} on the page: {text}"
        shown = text[text.index(label) - 1]
        assert shown == want, f"tile {label!r} shows {shown!r}, expected {want}"


# -- settings -----------------------------------------------------------------------------------

def config_file(rsp, tmp_path, options=None, tls=None, lines=()):
    """A config for rsp -t: the stage's settings with `options` (Python
    values), a tls table serving `tls` (a certificate) when given, and
    `lines` of Lua appended. Returns its path."""
    options = dict(options or {})
    (path,) = proxy_arguments(rsp.stage, CONFIG_PORT, [(LOOPBACK, 8001)], str(tmp_path), options)
    with open(path, "a") as f:
        if tls is not None:
            f.write(f'tls = {{ listen = {CONFIG_TLS_PORT}, certificates = {{ {{ cert = "{tls.cert}", '
                    f'key = "{tls.key}" }} }} }}\n')
        for line in lines:
            f.write(line + "\n")
    return path


@pytest.mark.parametrize("value", ["0", "-1", "1.5", '"many"', "1025", "true", "0/0", "{}"],
                         ids=["zero", "negative", "fraction", "word", "over-1024", "boolean", "nan", "table"])
def test_bad_http2_max_streams(rsp, tmp_path, value):
    """http2_max_streams that is not a whole number from 1 to 1024: rsp -t
    refuses the config with one line naming the setting and the range."""
    path = config_file(rsp, tmp_path, lines=[f"http2_max_streams = {value}"])
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, "http2_max_streams", words=("1", "1024"))


@pytest.mark.parametrize("value", [1, 128, 1024])
def test_http2_max_streams_accepted(rsp, tmp_path, value):
    """1, the default 128 and 1024 are accepted (rsp -t, nothing said)."""
    path = config_file(rsp, tmp_path, {"http2_max_streams": value})
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"rsp -t refused http2_max_streams = {value}: {result.stderr!r}"


@pytest.mark.parametrize("value", ['"yes"', "1", "{}", '"false"'], ids=["word", "number", "table", "quoted-false"])
def test_bad_tls_http2(rsp, tmp_path, certs, value):  # noqa: F811
    """tls.http2 that is not true or false: refused with one line naming
    tls.http2 and saying what it must be."""
    path = config_file(rsp, tmp_path, tls=certs.www, lines=[f"tls.http2 = {value}"])
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, "tls.http2", words=("true", "false"))


@pytest.mark.parametrize("value", ["true", "false"])
def test_tls_http2_accepted(rsp, tmp_path, certs, value):  # noqa: F811
    """tls.http2 = true and false are accepted."""
    path = config_file(rsp, tmp_path, tls=certs.www, lines=[f"tls.http2 = {value}"])
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"rsp -t refused tls.http2 = {value}: {result.stderr!r}"


def test_misspelt_http2_max_streams_is_warned_about(rsp, tmp_path):
    """http2_max_stream (an s short) is accepted with the warning that
    names the setting it is close to, as for rsp's other settings."""
    path = config_file(rsp, tmp_path, lines=["http2_max_stream = 4"])
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"rsp: {path}: warning: 'http2_max_stream' is not a setting; did you mean 'http2_max_streams'?" \
        in result.stderr, result.stderr


def test_misspelt_tls_http2_is_an_error(rsp, tmp_path, certs):  # noqa: F811
    """A field of tls a letter away from http2 (htp2) is an error naming
    tls and the field, and listing http2 among tls's fields."""
    path = config_file(rsp, tmp_path, tls=certs.www, lines=["tls.htp2 = false"])
    line = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, "tls", words=("'htp2'", "http2"))
    assert "acme, http2" in line, line
