"""Latency you can see (stage 19, issue 33): /metrics has a histogram of
request durations per site, rsp_request_duration_seconds{site}, and one
of backend response times per backend, rsp_backend_response_seconds
{backend}, with the buckets 5 ms .. 10 s and +Inf; status.json gives each
site's p50 and p99 (its "duration_seconds"), estimated from the buckets as
Prometheus's histogram_quantile() does, and the status page shows them.

/metrics is read here with Prometheus's own parser (Debian's
python3-prometheus-client, text_string_to_metric_families), and the
figures are checked against the requests each test makes on real
backends: every count exactly; a backend that waits 300 ms before its
answer puts that request above le="0.25" in both histograms and adds at
least 0.3 s to their sums (a lower bound is certain: rsp's clock runs
while the backend sleeps). Nothing asserts an upper bound on a time: a
loaded machine may make any request slow. A request counts in its site's
histogram when it is counted in rsp_requests_total (rsp's own answers
too), and in its backend's once the backend's response head came.
"""

import html.parser
import math
import socket

import pytest

from client import Conn, build_request, close_with_reset
from netutil import LOOPBACK
from test_status import _note_stage  # noqa: F401 (autouse: test_status's helpers ask the stage under test)
from test_status import (POLL_TIMEOUT, Traffic, ask_status, assert_status_answer, name_of, settled_status,
                         sites_by_name, start_with_status, status_json, wait_status)
from test_workers import owners, started_workers

prometheus_parser = pytest.importorskip(
    "prometheus_client.parser", reason="python3-prometheus-client is not installed (./setup-env.sh installs it)")

pytestmark = pytest.mark.stage(19)

BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
DELAY = 0.3          # s: what a slow request waits at the backend before its answer
SLOW = f"/bytes?n=100&delay={DELAY}"
SITE_FAMILY = "rsp_request_duration_seconds"
BACKEND_FAMILY = "rsp_backend_response_seconds"


class Histogram:
    """One labelled histogram of a family: {le: cumulative count}, sum, count."""

    def __init__(self):
        self.buckets, self.sum, self.count = {}, None, None

    def __repr__(self):
        return f"Histogram(buckets={self.buckets}, sum={self.sum}, count={self.count})"

    def at(self, le):
        return self.buckets[le]


def read_metrics(proxy):
    """GET /metrics, parsed by prometheus_client: {family name: family}."""
    r = ask_status(proxy.status_port, "/metrics")
    assert_status_answer(r, 200)
    text = r.body.decode("utf-8")
    try:
        return {f.name: f for f in prometheus_parser.text_string_to_metric_families(text)}
    except ValueError as e:
        pytest.fail(f"prometheus_client cannot read /metrics: {e}\n{text}")


def histograms(families, name, label):
    """The histograms of family `name`, by the value of their one label:
    checked to be a histogram with HELP, every sample labelled `label`
    (and le for buckets), the buckets exactly BOUNDS and +Inf, cumulative
    (never decreasing), +Inf equal to _count, _sum >= 0."""
    assert name in families, f"/metrics has no family {name}: {sorted(families)}"
    family = families[name]
    assert family.type == "histogram", f"{name} is a {family.type}"
    assert family.documentation, f"{name} has no HELP"
    found = {}
    for s in family.samples:
        labels = dict(s.labels)
        le = labels.pop("le", None)
        assert set(labels) == {label}, f"{s.name} labelled {s.labels}, not {label}"
        h = found.setdefault(labels[label], Histogram())
        if s.name == name + "_bucket":
            assert le is not None, s
            h.buckets[float(le)] = s.value
        elif s.name == name + "_sum":
            h.sum = s.value
        elif s.name == name + "_count":
            h.count = s.value
        else:
            pytest.fail(f"an odd sample in {name}: {s}")
    for key, h in found.items():
        where = f"{name}{{{label}={key!r}}}"
        assert list(h.buckets) == sorted(h.buckets) and tuple(h.buckets) == BOUNDS + (math.inf,), \
            f"{where}: buckets {list(h.buckets)}, not {BOUNDS} and +Inf in order"
        counts = list(h.buckets.values())
        assert all(a <= b for a, b in zip(counts, counts[1:])), f"{where}: buckets not cumulative: {h}"
        assert h.count == h.at(math.inf), f"{where}: _count {h.count} != le=+Inf {h.at(math.inf)}"
        assert h.sum is not None and h.sum >= 0, f"{where}: _sum {h.sum}"
    return found


def quantile(h, q):
    """Prometheus's histogram_quantile(q, ...) on one histogram (its
    promql/quantile.go, without the corner cases rsp cannot produce):
    None when it counted nothing."""
    if h.count == 0:
        return None
    rank = q * h.count
    bounds = list(h.buckets)
    b = next(i for i, le in enumerate(bounds) if h.at(le) >= rank)
    if b == len(bounds) - 1:
        return bounds[-2]
    start, below = (0.0, 0) if b == 0 else (bounds[b - 1], h.at(bounds[b - 1]))
    return start + (bounds[b] - start) * (rank - below) / (h.at(bounds[b]) - below)


def check_quantiles(doc, sites):
    """status.json's p50 and p99 of each site are the estimates from the
    site's buckets in /metrics (null for a site with no request)."""
    listed = sites_by_name(doc)
    assert set(listed) == set(sites), f"status.json's sites {sorted(listed)}, /metrics' {sorted(sites)}"
    for name, h in sites.items():
        got = listed[name].get("duration_seconds")
        assert isinstance(got, dict) and set(got) == {"p50", "p99"}, f"site {name}: duration_seconds {got}"
        for q, key in ((0.5, "p50"), (0.99, "p99")):
            expected = quantile(h, q)
            if expected is None:
                assert got[key] is None, f"site {name} counted nothing, yet {key} is {got[key]}"
            else:
                assert isinstance(got[key], (int, float)) and abs(got[key] - expected) < 1e-5, \
                    f"site {name}: {key} {got[key]}, the buckets {h.buckets} give {expected}"


class SiteCells(html.parser.HTMLParser):
    """The status page's sites table: {site: {"p50": text, "p99": text}}."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows, self._row, self._cell = {}, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self._row = [] if attrs.get("class") == "site" else None
        elif tag == "td" and self._row is not None:
            self._row.append([attrs.get("class"), ""])

    def handle_data(self, data):
        if self._row:
            self._row[-1][1] += data

    def handle_endtag(self, tag):
        if tag == "tr" and self._row:
            self.rows[self._row[0][1]] = {cls: text for cls, text in self._row if cls in ("p50", "p99")}
            self._row = None


def page_text(seconds):
    """How the page writes an estimate (as status_page.c's put_latency)."""
    if seconds is None:
        return "-"
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def check_page(proxy, doc):
    """The page's p50 and p99 cells say status.json's estimates."""
    r = ask_status(proxy.status_port, "/")
    assert_status_answer(r, 200)
    parser = SiteCells()
    parser.feed(r.body.decode("utf-8"))
    for site in doc["sites"]:
        cells = parser.rows.get(site["name"])
        assert cells is not None, f"no row for site {site['name']} on the page: {parser.rows}"
        for key in ("p50", "p99"):
            estimate = site["duration_seconds"][key]
            # Rounding may differ in the last digit between C's and Python's printf of a
            # float read back from "%.6f": compare with the estimate a hair either side.
            allowed = {page_text(estimate)} if estimate is None else \
                {page_text(estimate), page_text(estimate * (1 + 1e-6)), page_text(estimate * (1 - 1e-6))}
            assert cells.get(key) in allowed, f"site {site['name']}: the page's {key} is {cells.get(key)!r}, " \
                                              f"status.json's {estimate} reads {allowed}"


def test_latency_histograms_at_start(make_backend, start_proxy):
    """Before any request: a histogram for every configured site and every
    backend, all zero (so that rates work from the first scrape); p50 and
    p99 null in status.json and "-" on the page."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_with_status(start_proxy, a, sites={"b.test": [b]})
    families = read_metrics(proxy)
    sites = histograms(families, SITE_FAMILY, "site")
    backends = histograms(families, BACKEND_FAMILY, "backend")
    assert set(sites) == {"default", "b.test"}, sites
    assert set(backends) == {name_of(a), name_of(b)}, backends
    for h in list(sites.values()) + list(backends.values()):
        assert h.count == 0 and h.sum == 0 and not any(h.buckets.values()), h
    doc = status_json(proxy)
    check_quantiles(doc, sites)
    check_page(proxy, doc)


def test_latency_counts_every_request(make_backend, start_proxy):
    """18 fast requests and 2 that wait 300 ms at the backend on the
    default site, 5 fast ones on site b.test with its own backend, one
    garbage request rsp answers itself (a 400, site "-"): each site's
    _count is its requests (and its rsp_requests_total); the backends'
    _count the requests they answered (the 400 none); the two slow ones
    above le="0.25" in both histograms and at least 0.6 s in both sums;
    status.json's p50 and p99 the estimates from the buckets, p99 at least
    0.3 s (10% of the default site's requests took that long); the page
    says the same."""
    a, b = make_backend("a"), make_backend("b")
    proxy = start_with_status(start_proxy, a, sites={"b.test": [b]})
    traffic = Traffic(proxy.port)
    for n in range(20):
        r = traffic.get(SLOW if n in (7, 15) else f"/echo?n={n}", "a.test")
        assert r.status == 200, r
    for n in range(5):
        assert traffic.get(f"/echo?n={n}", "b.test").status == 200
    assert traffic.send(b"GARBAGE\r\n\r\n").status == 400
    doc = settled_status(proxy, 26)
    families = read_metrics(proxy)
    sites = histograms(families, SITE_FAMILY, "site")
    backends = histograms(families, BACKEND_FAMILY, "backend")

    assert set(sites) == {"default", "b.test", "-"}, sites
    assert (sites["default"].count, sites["b.test"].count, sites["-"].count) == (20, 5, 1), sites
    requests = {}
    # (prometheus_client names a counter's family without its _total)
    for s in (s for f in families.values() for s in f.samples if s.name == "rsp_requests_total"):
        requests[s.labels["site"]] = requests.get(s.labels["site"], 0) + s.value
    assert requests == {name: h.count for name, h in sites.items()}, \
        f"rsp_requests_total by site {requests} != the histograms' _count {sites}"
    assert sites["default"].at(0.25) <= 18, f"the two 300 ms requests are not above le=0.25: {sites['default']}"
    assert sites["default"].sum >= 2 * DELAY - 1e-5, f"_sum below the 0.6 s the backend waited: {sites['default']}"

    assert set(backends) == {name_of(a), name_of(b)}, backends
    assert (backends[name_of(a)].count, backends[name_of(b)].count) == (20, 5), backends
    assert backends[name_of(a)].at(0.25) <= 18, f"the two 300 ms answers are not above le=0.25: {backends}"
    assert backends[name_of(a)].sum >= 2 * DELAY - 1e-5, backends
    assert sites["b.test"].at(0.25) <= 5 and backends[name_of(b)].at(math.inf) == 5

    check_quantiles(doc, sites)
    default = sites_by_name(doc)["default"]["duration_seconds"]
    assert default["p99"] >= DELAY, f"p99 {default['p99']} with 10% of the requests at {DELAY} s or more"
    assert default["p50"] <= default["p99"], default
    check_page(proxy, doc)


def test_latency_counted_on_keep_alive_and_for_a_client_that_left(make_backend, start_proxy):
    """Three requests on one keep-alive connection, the middle one slow:
    three durations, each from its own first byte, the slow one above
    le="0.25"; a client that sends a slow request and leaves before the
    answer (a reset) is counted as its 499 in the site's histogram (until it left),
    and not in the backend's, which never answered it."""
    a = make_backend("a")
    proxy = start_with_status(start_proxy, a)
    with Conn(proxy.port, timeout=POLL_TIMEOUT) as conn:
        for path in ("/echo?k=1", SLOW, "/echo?k=3"):
            assert conn.get(path).status == 200
    sock = socket.create_connection((LOOPBACK, proxy.port), timeout=POLL_TIMEOUT)
    try:
        sock.sendall(build_request(proxy.port, "GET", f"/bytes?n=100&delay={2 * DELAY}"))
        wait_status(proxy, lambda d: d["requests_in_flight"] == 1, "the leaving client's request in flight")
    finally:
        close_with_reset(sock)
    wait_status(proxy, lambda d: d["connections"] == 0, "both connections closed")
    doc = settled_status(proxy, 4)
    assert sites_by_name(doc)["default"]["codes"] == {"200": 3, "499": 1}, doc["sites"]
    families = read_metrics(proxy)
    site = histograms(families, SITE_FAMILY, "site")["default"]
    assert site.count == 4 and site.at(0.25) <= 3 and site.sum >= DELAY - 1e-5, site
    backend = histograms(families, BACKEND_FAMILY, "backend")[name_of(a)]
    assert backend.count == 3 and backend.at(0.25) <= 2 and backend.sum >= DELAY - 1e-5, backend
    check_quantiles(doc, histograms(families, SITE_FAMILY, "site"))


def test_latency_added_up_across_workers(make_backend, start_proxy):
    """workers = 2: 40 connections opened one after another and held (the
    workers take turns: both hold some), a request on each, every tenth
    slow; the master's /metrics counts all 40 in the site's and the
    backend's histograms, the 4 slow ones above le="0.25" and in the sums,
    and status.json's quantiles agree with the buckets: the workers'
    counts together, not one worker's."""
    a = make_backend("a")
    proxy = start_with_status(start_proxy, a, workers=2)
    pids = started_workers(proxy, 2)
    held, placed = [], {}
    try:
        for n in range(40):
            conn = Conn(proxy.port, timeout=POLL_TIMEOUT)
            held.append(conn)
            assert conn.get(SLOW if n % 10 == 9 else f"/echo?n={n}").status == 200
            for pid in owners(conn.sock, proxy.port, pids):
                placed[pid] = placed.get(pid, 0) + 1
        assert set(placed) == set(pids), f"the 40 connections all went to one worker: {placed}"
    finally:
        for conn in held:
            conn.close()
    # The workers see the closes a moment later: settled_status compares
    # status.json's connections with a later /metrics.
    wait_status(proxy, lambda d: d["connections"] == 0, "the 40 connections closed")
    doc = settled_status(proxy, 40)
    families = read_metrics(proxy)
    site = histograms(families, SITE_FAMILY, "site")["default"]
    backend = histograms(families, BACKEND_FAMILY, "backend")[name_of(a)]
    assert site.count == 40 and backend.count == 40, (site, backend)
    assert site.at(0.25) <= 36 and backend.at(0.25) <= 36, (site, backend)
    assert site.sum >= 4 * DELAY - 1e-5 and backend.sum >= 4 * DELAY - 1e-5, (site, backend)
    check_quantiles(doc, histograms(families, SITE_FAMILY, "site"))
    assert sites_by_name(doc)["default"]["duration_seconds"]["p99"] >= DELAY, doc["sites"]
