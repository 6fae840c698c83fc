"""HTTPS (stages 14 and 15): the `tls` table opens a second listener speaking TLS
1.2 and 1.3 (never 1.0 or 1.1), with a certificate per name picked by SNI
(a wildcard covering exactly one label; the first certificate for no SNI
or an unknown name), ALPN http/1.1 only, session tickets; requests over it
reach the backends with X-Forwarded-Proto: https and Forwarded:
...;proto=https, and its responses carry Strict-Transport-Security when
`hsts` is set (stage 15 on). From stage 15 too, `redirect_http` turns
the plain listener into redirects to https:// (301 for GET and HEAD, 308
for other methods; never ACME challenges), and `acme_webroot` makes it serve
/.well-known/acme-challenge/TOKEN from certbot's webroot, refusing every
other name under that path (404) and every other method (405).

The handshake runs on the reactor: clients that stall in it (or trickle
it) are cut off by header_timeout (or served), garbage is refused, clients
leaving mid-handshake leave nothing behind, while others are served.
Bodies of every size arrive byte-exact both ways, slow readers included;
keep-alive, pipelining, one-byte records and WebSocket (wss) work over
TLS, and a response that ends with the connection ends with a
close_notify; a SIGHUP reloads certificates rewritten in place (in every
worker, and under handshakes in progress), tickets survive it; SIGTERM
drains TLS connections; the status listener counts handshakes; config
errors name the setting; a certificate past its date is a warning. ab
runs 5,000 HTTPS requests; workers share the ticket keys. (certbot and
pebble through rsp, end to end: test_acme.py.)

Certificates come from a throwaway CA (tlsutil.py); clients trust it
and nothing else. Names are under .test (RFC 2606), resolved by nobody:
every client connects to 127.0.0.1 and sends the name as SNI and Host.
Waiting is a bounded poll; the only times asserted are the handshake
timeout's (fired within a generous bound, not before 80% of it).
"""

import base64
import hashlib
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from checks import assert_config_error, assert_rsp_page, assert_serves, skip_without_fds, wait_for_log, wait_idle
from client import (Conn, Reader, close_with_reset, connect, exchange, get, read_framed_response, read_to_eof, request,
                    request_bytes)
from netutil import LOOPBACK, free_port, ipv6_loopback_available, wait_for, wait_until_listening
from pattern import assert_is_pattern, pattern
from promparse import value as metric_value
from proxy import backend_address, count_fds, is_sanitized, large_bodies, proxy_arguments, run_rsp, vm_rss
from test_operations import sighup, sighup_failing
from test_status import metrics, status_json
from test_workers import owners, started_workers, wait_state
from websocket import BINARY, CLOSE, PONG, WebSocketBackend, WebSocketClient, encode_frame, read_frame

pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")
from tlsutil import (EXPIRED_AT, TLSConn, cert_names, client_hello, handshake_only, https_get,  # noqa: E402
                     https_request, old_protocol_context, session_ca, tls_connect)

pytestmark = pytest.mark.stage(14)

KiB = 1024
MiB = 1024 * KiB
POLL_TIMEOUT = 5.0           # s: a bound on waiting for something that must happen (never a measurement)
TIMEOUT = 0.5                # s: header_timeout, where a test is about it
FIRED_BY = 5.0               # s: it must have fired by then (a bound, not a measurement)
NOT_BEFORE = 0.8 * TIMEOUT   # s: and not before this
LONG = 30                    # s: a timeout the test must never reach
WWW = "www.example.test"     # the name most tests use (SNI and Host)
CHALLENGE = "/.well-known/acme-challenge/"
TOKEN = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"  # what ACME tokens look like (43 base64url characters)
HSTS = 31536000


# -- fixtures and helpers --------------------------------------------------------------

@pytest.fixture(scope="session")
def ca():
    """The test session's throwaway CA (tlsutil.session_ca)."""
    return session_ca()


@pytest.fixture(scope="session")
def certs(ca, tmp_path_factory):
    """Certificates every test may use (files in a session directory):
    www (www.example.test and example.test), wild (*.example.test),
    other (other.test and www.other.test), default (default.test)."""
    d = tmp_path_factory.mktemp("certs")
    return SimpleNamespace(
        www=ca.issue(d, "www", [WWW, "example.test"]),
        wild=ca.issue(d, "wild", ["*.example.test"]),
        other=ca.issue(d, "other", ["other.test", "www.other.test"]),
        default=ca.issue(d, "default", ["default.test"]),
    )


@pytest.fixture(scope="session")
def ctx(ca):
    """A client context trusting the CA and checking the host name."""
    return ca.client_context()


@pytest.fixture(scope="session")
def any_name_ctx(ca):
    """A client context trusting the CA that accepts a certificate for
    any name (to see which certificate rsp picked)."""
    return ca.client_context(check_hostname=False)


def start_tls(start_proxy, *backends, certificates, tls_listen=None, redirect_http=None, hsts=None, tls=None,
              **options):
    """start_proxy(*backends, **options) with a TLS listener (tls.listen:
    tls_listen, else 127.0.0.1 on a free port; its port in proxy.tls_port)
    serving `certificates` (IssuedCerts; the first the default);
    redirect_http and hsts go into the tls table when given; tls= adds
    (or overrides) fields of it."""
    if tls_listen is None:
        tls_port = free_port()
        tls_listen = f"{LOOPBACK}:{tls_port}"
    else:
        tls_port = tls_listen if isinstance(tls_listen, int) else int(tls_listen.rsplit(":", 1)[1])
    table = {"listen": tls_listen, "certificates": [c.entry() for c in certificates]}
    if redirect_http is not None:
        table["redirect_http"] = redirect_http
    if hsts is not None:
        table["hsts"] = hsts
    table.update(tls or {})
    proxy = start_proxy(*backends, tls=table, **options)
    try:
        wait_until_listening(tls_port, proxy.process, POLL_TIMEOUT, what="rsp's TLS listener")
    except RuntimeError as e:
        raise RuntimeError(f"{e}\n{proxy.describe()}") from None
    proxy.tls_port = tls_port
    return proxy


def assert_tls_serves(proxy, ctx, n=5000, server_name=WWW):
    """A GET of /bytes?n=N over a new TLS connection is answered in full."""
    r = https_get(proxy.tls_port, f"/bytes?n={n}", ctx, server_name)
    assert r.status == 200, f"a normal HTTPS request failed: {r!r} {r.raw[:200]!r}"
    assert_is_pattern(r.body, n)
    return r


def assert_both_serve(proxy, ctx):
    """The plain listener and the TLS listener each answer a normal request."""
    assert_serves(proxy, 1000)
    assert_tls_serves(proxy, ctx, 1000)


def echoed_headers(r):
    """{lowercase name: [values]} of what the HTTP test backend's /echo received."""
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    found = {}
    for name, value in r.json()["headers"]:
        found.setdefault(name.lower(), []).append(value)
    return found


def sts(r):
    """The Strict-Transport-Security values of a response."""
    return r.header_values("Strict-Transport-Security")


class Ending:
    """A client of the TLS port that connects, then (in a thread) sends
    `data` (bytes, or nothing), optionally goes on with `then(sock)`, and
    reads until the connection ends. result() is (everything received,
    reset?, seconds from before the connect to the end). A reset or a
    broken pipe while sending ends it too: refusing garbage that way is
    rsp's right."""

    def __init__(self, port, data=b"", then=None):
        self.received = b""
        self.reset = False
        self.error = self.ended = None
        self.started = time.monotonic()
        self.sock = connect(port, timeout=FIRED_BY + LONG)
        self._thread = threading.Thread(target=self._run, args=(data, then), daemon=True)
        self._thread.start()

    def _run(self, data, then):
        try:
            try:
                if data:
                    self.sock.sendall(data)
            except (ConnectionResetError, BrokenPipeError):
                self.reset = True
                return
            if then is not None:
                then(self.sock)
            self.received, self.reset = read_to_eof(self.sock)
        except Exception as e:  # reported by result()
            self.error = e
        finally:
            self.ended = time.monotonic()
            self.sock.close()

    def result(self, bound=FIRED_BY):
        self._thread.join(bound + 1)
        assert self.ended is not None, f"the connection was still open after {bound + 1} s"
        assert self.error is None, f"the client failed: {self.error!r}"
        elapsed = self.ended - self.started
        assert elapsed < bound, f"the connection ended only after {elapsed:.2f} s"
        return self.received, self.reset, elapsed


def finish_server_flight(sock, hello_state):
    """After a whole ClientHello: reads the server's first flight (until
    the handshake needs nothing more from the server) and feeds it to the
    client state, but never sends the client's Finished: a client that
    stops in the middle of the handshake, after the server spoke."""
    obj, incoming, outgoing = hello_state
    sock.settimeout(POLL_TIMEOUT)
    while True:
        data = sock.recv(65536)
        assert data, "rsp closed before its first handshake flight"
        incoming.write(data)
        try:
            obj.do_handshake()
            return  # done on the client side: the Finished waits in `outgoing`, unsent
        except ssl.SSLWantReadError:
            if outgoing.pending:
                return  # the client's answer is ready and is not sent


# -- the basics -----------------------------------------------------------------------

def test_https_request_reaches_the_backend(backend, start_proxy, certs, ctx):
    """A GET over TLS (verified against the CA, for www.example.test) is
    answered by the backend; the plain listener keeps serving plain HTTP
    at the same time."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    r = https_get(proxy.tls_port, "/echo?x=1", ctx, WWW)
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    assert r.json()["path"] == "/echo?x=1"
    assert r.json()["method"] == "GET"
    assert r.header("X-Backend") == "a"
    assert r.peer_fingerprint == certs.www.fingerprint
    assert_serves(proxy)
    plain = get(proxy.port, "/echo")
    assert plain.status == 200 and plain.json()["backend"] == "a"
    assert backend.hits["/echo"] == 2


@pytest.mark.parametrize("form", ["number", "address"])
def test_tls_listen_forms(backend, start_proxy, certs, ctx, form):
    """tls.listen as a port number, or as "127.0.0.1:PORT": either way
    rsp accepts TLS on that port (reached here on 127.0.0.1)."""
    port = free_port()
    proxy = start_tls(start_proxy, backend, certificates=[certs.www],
                      tls_listen=port if form == "number" else f"{LOOPBACK}:{port}")
    assert proxy.tls_port == port
    assert_tls_serves(proxy, ctx)


@pytest.mark.skipif(not ipv6_loopback_available(), reason="no IPv6 loopback (::1) here")
def test_tls_listen_ipv6(backend, start_proxy, certs, ctx):
    """tls.listen = "[::1]:PORT" accepts TLS over IPv6."""
    port = free_port()
    start_tls(start_proxy, backend, certificates=[certs.www], tls_listen=f"[::1]:{port}")
    with tls_connect(port, ctx, WWW, address="::1") as sock:
        sock.sendall(request_bytes("GET", "/bytes?n=100", [("Connection", "close")], host=WWW))
        r = read_framed_response(Reader(sock))
    assert r.status == 200
    assert_is_pattern(r.body, 100)


# (SNI sent or None, the certificate rsp must present: certs.<name>)
SNI_CASES = [
    (None, "default"),                   # no SNI: the first certificate
    ("default.test", "default"),
    ("other.test", "other"),
    ("www.other.test", "other"),         # a second subjectAltName
    ("WWW.Other.TEST", "other"),         # names are case-insensitive
    ("a.example.test", "wild"),          # the wildcard covers one label
    ("A.EXAMPLE.TEST", "wild"),
    ("x-1.example.test", "wild"),
    ("example.test", "default"),         # ... not the bare domain
    ("a.b.example.test", "default"),     # ... nor two labels
    ("aexample.test", "default"),
    ("example.test.evil", "default"),
    ("other.test.example", "default"),
    ("unknown.test", "default"),         # an unknown name: the first certificate
]


def test_sni_picks_the_certificate(backend, start_proxy, certs, any_name_ctx):
    """With certificates default.test (first), *.example.test and
    other.test + www.other.test, each SNI gets the certificate whose
    subjectAltName matches (case-insensitively; a wildcard exactly one
    label), and no SNI or any other name gets the first. Every mismatch
    is listed."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.default, certs.wild, certs.other])
    wrong = []
    for name, expected in SNI_CASES:
        h = handshake_only(proxy.tls_port, any_name_ctx, name)
        want = getattr(certs, expected)
        if h.peer_fingerprint != want.fingerprint:
            got = [c for c in ("default", "wild", "other") if getattr(certs, c).fingerprint == h.peer_fingerprint]
            wrong.append(f"SNI {name!r}: got {got or cert_names(h.peer_cert)}, expected {expected}")
    assert not wrong, "wrong certificates:\n  " + "\n  ".join(wrong)
    assert_tls_serves(proxy, any_name_ctx, server_name="a.example.test")


def test_twenty_certificates(backend, start_proxy, ca, ctx, tmp_path):
    """Twenty certificates (ECDSA, each for its own name): each name gets
    its own, verified, and an unknown name the first."""
    leaves = [ca.issue(tmp_path, f"c{i}", [f"site{i}.example.test"], key_type="ec") for i in range(20)]
    proxy = start_tls(start_proxy, backend, certificates=leaves)
    for i in (0, 1, 7, 13, 19):
        h = handshake_only(proxy.tls_port, ctx, f"site{i}.example.test")
        assert h.peer_fingerprint == leaves[i].fingerprint, f"site{i}: got {cert_names(h.peer_cert)}"
    any_name = ca.client_context(check_hostname=False)
    assert handshake_only(proxy.tls_port, any_name, "nosuch.test").peer_fingerprint == leaves[0].fingerprint


def test_sni_certificates_verify(backend, start_proxy, certs, ctx):
    """A client that checks the host name (as browsers do) verifies the
    certificate rsp presents for each name it has one for, and the
    request is served."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.default, certs.wild, certs.other])
    for name in ("default.test", "other.test", "www.other.test", "a.example.test", "zz.example.test"):
        r = https_get(proxy.tls_port, "/bytes?n=10", ctx, name)
        assert r.status == 200, f"SNI {name}: {r!r}"
        assert_is_pattern(r.body, 10)


def test_sni_exact_name_and_wildcard_both_served(backend, start_proxy, certs, any_name_ctx):
    """www.example.test + example.test (first) and *.example.test: the
    apex gets the first (the wildcard does not cover it), a.example.test
    the wildcard; www.example.test is in both and may get either, but
    must get one that covers it."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www, certs.wild])
    assert handshake_only(proxy.tls_port, any_name_ctx, "example.test").peer_fingerprint == certs.www.fingerprint
    assert handshake_only(proxy.tls_port, any_name_ctx, "a.example.test").peer_fingerprint == \
        certs.wild.fingerprint
    got = handshake_only(proxy.tls_port, any_name_ctx, WWW).peer_fingerprint
    assert got in (certs.www.fingerprint, certs.wild.fingerprint)


def test_full_chain_is_sent(backend, start_proxy, ca, tmp_path):
    """A certificate from an intermediate CA, its file holding leaf then
    intermediate (certbot's fullchain.pem): rsp sends the whole chain, so
    a client that trusts only the root verifies it."""
    inter = ca.intermediate()
    leaf = inter.issue(tmp_path, "chained", ["chain.example.test"])
    with open(leaf.cert) as f:
        assert f.read().count("BEGIN CERTIFICATE") == 2
    proxy = start_tls(start_proxy, backend, certificates=[leaf])
    r = https_get(proxy.tls_port, "/bytes?n=10", ca.client_context(), "chain.example.test")
    assert r.status == 200 and r.peer_fingerprint == leaf.fingerprint


@pytest.mark.parametrize("key_type, key_format", [("rsa", "pkcs8"), ("rsa", "traditional"), ("ec", "pkcs8"),
                                                  ("ec", "traditional")])
def test_key_types_and_formats(backend, start_proxy, ca, ctx, tmp_path, key_type, key_format):
    """RSA and ECDSA P-256 keys (certbot makes ECDSA by default), in
    PKCS#8 ("BEGIN PRIVATE KEY") or the traditional format ("BEGIN RSA
    PRIVATE KEY", "BEGIN EC PRIVATE KEY"): rsp loads each and serves."""
    leaf = ca.issue(tmp_path, "k", [WWW], key_type=key_type, key_format=key_format)
    proxy = start_tls(start_proxy, backend, certificates=[leaf])
    r = https_get(proxy.tls_port, "/bytes?n=100", ctx, WWW)
    assert r.status == 200 and r.peer_fingerprint == leaf.fingerprint
    assert_is_pattern(r.body, 100)


# -- protocol versions, ALPN, resumption --------------------------------------------------

@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["1.2", "1.3"])
def test_tls12_and_tls13_work(backend, start_proxy, certs, ca, version):
    """A client limited to TLS 1.2, or to 1.3, is served over that version."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    r = https_get(proxy.tls_port, "/bytes?n=1000", ca.client_context(minimum=version, maximum=version), WWW)
    assert r.status == 200
    assert_is_pattern(r.body, 1000)
    assert r.tls_version == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]


@pytest.mark.parametrize("ciphers, served", [
    ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256", True),   # forward secret, AEAD
    ("ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305", True),
    ("AES128-GCM-SHA256:AES256-GCM-SHA384", False),                          # no forward secrecy
    ("ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:AES128-SHA", False),       # CBC with SHA-1
], ids=["ecdhe-gcm", "ecdhe-chacha", "static-rsa-gcm", "cbc-sha1"])
def test_tls12_ciphers_are_mozilla_intermediate(backend, start_proxy, certs, ca, ciphers, served):
    """Over TLS 1.2, a client offering only ciphers of Mozilla's
    "intermediate" list is served; one offering only ciphers outside it
    (no forward secrecy, or CBC with SHA-1) fails the handshake."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    client = ca.client_context(minimum=ssl.TLSVersion.TLSv1_2, maximum=ssl.TLSVersion.TLSv1_2)
    client.set_ciphers(ciphers)
    if served:
        r = https_get(proxy.tls_port, "/bytes?n=10", client, WWW)
        assert r.status == 200 and r.tls_version == "TLSv1.2"
    else:
        with pytest.raises(ssl.SSLError):
            https_get(proxy.tls_port, "/bytes?n=10", client, WWW)
    assert_tls_serves(proxy, ca.client_context(), 10)


def test_default_client_gets_tls13(backend, start_proxy, certs, ctx):
    """A client offering everything it can negotiates TLS 1.3."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    assert https_get(proxy.tls_port, "/bytes?n=1", ctx, WWW).tls_version == "TLSv1.3"


def old_protocol_server(cert, version):
    """A Python TLS server on a free port that speaks `version` (at
    security level 0): the control showing that the old-protocol client
    really can do the old version here. Returns (port, listener)."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert.cert, cert.key)
    sctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        sctx.minimum_version = version
    listener = socket.create_server((LOOPBACK, 0))
    listener.settimeout(POLL_TIMEOUT)

    def serve():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        try:
            with sctx.wrap_socket(conn, server_side=True) as s:
                s.recv(1)
        except (OSError, ssl.SSLError):
            pass

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], listener


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["1.0", "1.1"])
def test_old_tls_versions_refused(backend, start_proxy, certs, ctx, version):
    """A client that offers only TLS 1.0 (or 1.1) fails the handshake with
    rsp, while the very same client completes one with a Python server
    that allows that version (so the refusal is rsp's); rsp goes on
    serving."""
    port, listener = old_protocol_server(certs.www, version)
    with listener:
        try:
            control = handshake_only(port, old_protocol_context(version))
        except (ssl.SSLError, OSError) as e:
            pytest.skip(f"this OpenSSL cannot speak {version.name} even at security level 0: {e}")
    assert control.tls_version in ("TLSv1", "TLSv1.1")
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    with pytest.raises((ssl.SSLError, ConnectionError)):
        h = handshake_only(proxy.tls_port, old_protocol_context(version), WWW)
        pytest.fail(f"rsp completed a handshake with {h.tls_version}")
    assert backend.requests == 0
    assert_tls_serves(proxy, ctx)


# Until stage 20 rsp never selects h2 (test_http2.py has the ALPN of stage 20 on).
BEFORE_HTTP2 = pytest.mark.stage(14, 19)


@pytest.mark.parametrize("offered, selected", [
    pytest.param(["h2", "http/1.1"], "http/1.1", marks=BEFORE_HTTP2, id="h2-and-http1.1"),
    pytest.param(["http/1.1"], "http/1.1", id="http1.1"),
    pytest.param(["h2"], None, marks=BEFORE_HTTP2, id="h2-only"),
    pytest.param(None, None, id="none")])
def test_alpn(backend, start_proxy, certs, ca, offered, selected):
    """ALPN: rsp selects http/1.1 when offered, never h2 (before stage
    20); a client offering only h2 gets no protocol selected (the
    handshake still completes and HTTP/1.1 is served on it); a client
    offering nothing gets nothing."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    r = https_get(proxy.tls_port, "/bytes?n=100", ca.client_context(alpn=offered), WWW)
    assert r.alpn == selected, f"offered {offered}, rsp selected {r.alpn!r}"
    assert r.status == 200
    assert_is_pattern(r.body, 100)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["1.2", "1.3"])
def test_session_resumption(backend, start_proxy, certs, ca, version):
    """A second connection offering the first one's session (a ticket) is
    resumed (no full handshake), and served; so is a third from the same
    session. A fresh connection without a session is not resumed."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    c = ca.client_context(minimum=version, maximum=version)
    first = https_get(proxy.tls_port, "/bytes?n=10", c, WWW)   # with 1.3 the ticket comes after the handshake
    assert first.status == 200 and not first.session_reused
    assert first.session is not None, "no session (ticket) after the first connection"
    for i in range(2):
        again = https_get(proxy.tls_port, "/bytes?n=10", c, WWW, session=first.session)
        assert again.session_reused, f"connection {i + 2} offering the first one's session was not resumed"
        assert again.status == 200
        assert_is_pattern(again.body, 10)
    assert not https_get(proxy.tls_port, "/bytes?n=10", c, WWW).session_reused


def test_session_resumes_after_a_reload(backend, start_proxy, certs, ca):
    """A session (TLS 1.3 ticket) from before a SIGHUP resumes after it:
    a reload does not throw every client back to a full handshake."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    c = ca.client_context()
    first = https_get(proxy.tls_port, "/bytes?n=10", c, WWW)
    sighup(proxy, 2)
    again = https_get(proxy.tls_port, "/bytes?n=10", c, WWW, session=first.session)
    assert again.status == 200
    assert again.session_reused, "a session from before the reload was not resumed after it"


def test_common_name_when_no_subject_alt_name(backend, start_proxy, certs, ca, tmp_path, any_name_ctx):
    """A certificate without subjectAltName (an old one) is picked by SNI
    through its common name."""
    legacy = ca.issue(tmp_path, "legacy", [], common_name="legacy.test")
    proxy = start_tls(start_proxy, backend, certificates=[certs.www, legacy])
    assert handshake_only(proxy.tls_port, any_name_ctx, "legacy.test").peer_fingerprint == legacy.fingerprint
    assert handshake_only(proxy.tls_port, any_name_ctx, "other.test").peer_fingerprint == certs.www.fingerprint


# -- what the backend is told; HSTS -----------------------------------------------------------

def test_forwarded_proto_https(backend, start_proxy, certs, ctx):
    """Over TLS the backend gets exactly one X-Forwarded-Proto: https and
    one Forwarded: for=127.0.0.1;proto=https;host=HOST, whatever the
    client claimed in those headers; over plain HTTP they say http."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    spoofs = [("X-Forwarded-Proto", "http"), ("Forwarded", "for=6.6.6.6;proto=http")]
    got = echoed_headers(https_get(proxy.tls_port, "/echo", ctx, WWW, headers=spoofs))
    assert got.get("x-forwarded-proto") == ["https"], got
    assert got.get("forwarded") == [f"for=127.0.0.1;proto=https;host={WWW}"], got
    plain = echoed_headers(get(proxy.port, "/echo", host=WWW,
                               headers=[("X-Forwarded-Proto", "https"), ("Forwarded", "proto=https")]))
    assert plain.get("x-forwarded-proto") == ["http"], plain
    assert plain.get("forwarded") == [f"for=127.0.0.1;proto=http;host={WWW}"], plain


def test_forwarded_port_is_the_listeners(backend, start_proxy, certs, ctx):
    """X-Forwarded-Port is the port the client connected to: the TLS
    listener's over HTTPS, the plain listener's over HTTP, whatever the
    client claimed (its X-Forwarded-Port and X-Forwarded-Ssl never reach
    the backend)."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    spoofs = [("X-Forwarded-Port", "1"), ("X-Forwarded-Ssl", "off")]
    got = echoed_headers(https_get(proxy.tls_port, "/echo", ctx, WWW, headers=spoofs))
    assert got.get("x-forwarded-port") == [str(proxy.tls_port)] and "x-forwarded-ssl" not in got, got
    plain = echoed_headers(get(proxy.port, "/echo", host=WWW, headers=spoofs))
    assert plain.get("x-forwarded-port") == [str(proxy.port)] and "x-forwarded-ssl" not in plain, plain


def test_forwarded_proto_on_a_kept_tls_connection(backend, start_proxy, certs, ctx):
    """Every request of a keep-alive TLS connection (not only the first)
    is forwarded with proto=https."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    with TLSConn(proxy.tls_port, ctx, WWW) as c:
        for i in range(3):
            got = echoed_headers(c.get(f"/echo?i={i}"))
            assert got.get("x-forwarded-proto") == ["https"], (i, got)
            assert got.get("forwarded") == [f"for=127.0.0.1;proto=https;host={WWW}"], (i, got)


@pytest.mark.stage(15)
def test_hsts_on_https_responses_only(make_keepalive_backend, start_proxy, certs, ctx):
    """hsts = 31536000: every HTTPS response carries exactly one
    Strict-Transport-Security: max-age=31536000 (a backend's 200, 404,
    204 and chunked 200, a HEAD, each response of a keep-alive
    connection, rsp's own 421 for an unknown site); no plain HTTP
    response carries it."""
    a = make_keepalive_backend("a")
    proxy = start_tls(start_proxy, certificates=[certs.www], hsts=HSTS, sites={WWW: [a]})
    want = [f"max-age={HSTS}"]
    for method, path, status in [("GET", "/cl?size=10", 200), ("GET", "/status?code=404", 404),
                                 ("GET", "/status?code=204", 204), ("GET", "/chunked?size=3000&chunks=3", 200),
                                 ("HEAD", "/cl?size=10", 200)]:
        r = https_request(proxy.tls_port, path, ctx, WWW, method=method)
        assert r.status == status and r.header("X-Backend") == "a", f"{method} {path}: {r!r}"
        assert sts(r) == want, f"{method} {path}: {r.headers}"
    r = https_get(proxy.tls_port, "/cl?size=10", ctx, WWW, host="nosuch.example.test")
    assert r.status == 421 and sts(r) == want, f"rsp's own answer over TLS: {r.headers}"
    with TLSConn(proxy.tls_port, ctx, WWW) as c:
        for i in range(3):
            r = c.get(f"/cl?size={i}")
            assert r.status == 200 and sts(r) == want, (i, r.headers)
    for path, status in (("/cl?size=10", 200), ("/status?code=404", 404)):
        r = get(proxy.port, path, host=WWW)
        assert r.status == status and sts(r) == [], f"plain HTTP {path}: {r.headers}"
    r = get(proxy.port, "/", host="nosuch.example.test")
    assert r.status == 421 and sts(r) == [], r.headers


@pytest.mark.stage(15)
@pytest.mark.parametrize("hsts", [0, None], ids=["zero", "absent"])
def test_no_hsts_by_default(backend, start_proxy, certs, ctx, hsts):
    """hsts = 0, or no hsts at all: no Strict-Transport-Security header."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], hsts=hsts)
    r = https_get(proxy.tls_port, "/bytes?n=10", ctx, WWW)
    assert r.status == 200 and sts(r) == [], r.headers


# -- redirect_http ---------------------------------------------------------------------

# (id, Host sent ({plain}: rsp's plain port), target, Location without its
# scheme ({tls}: the TLS port))
REDIRECTS = [
    ("name", WWW, "/", f"{WWW}:{{tls}}/"),
    ("name-and-port", f"{WWW}:{{plain}}", "/a/b?x=1&y=%2F&z", f"{WWW}:{{tls}}/a/b?x=1&y=%2F&z"),
    ("other-port", f"{WWW}:8080", "/p?q", f"{WWW}:{{tls}}/p?q"),
    ("address", f"{LOOPBACK}:{{plain}}", "/x", f"{LOOPBACK}:{{tls}}/x"),
    ("ipv6-with-port", "[::1]:{plain}", "/v6?a=b", "[::1]:{tls}/v6?a=b"),
    ("ipv6", "[::1]", "/v6", "[::1]:{tls}/v6"),
    ("absolute-form", WWW, f"http://{WWW}/abs?q=1", f"{WWW}:{{tls}}/abs?q=1"),
]


@pytest.mark.stage(15)
@pytest.mark.parametrize("host, target, location", [r[1:] for r in REDIRECTS], ids=[r[0] for r in REDIRECTS])
def test_redirect_http(backend, start_proxy, certs, host, target, location):
    """redirect_http = true: a plain request gets a complete 301 (a body
    of its Content-Length) to https://HOST:TLSPORT/path?query, HOST being
    the Host's name without its port, then the path and the query; no
    backend sees it; no Strict-Transport-Security over plain HTTP even
    with hsts set."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], redirect_http=True, hsts=HSTS)
    host = host.format(plain=proxy.port)
    with Conn(proxy.port, host=host) as c:
        r = c.get(target)
    assert r.status == 301, f"{r!r} {r.raw[:300]!r}"
    assert r.header("Location") == "https://" + location.format(tls=proxy.tls_port), r.headers
    assert r.framing == "length" and r.complete, r
    assert int(r.header("Content-Length")) == len(r.body)
    assert sts(r) == [], r.headers
    assert backend.requests == 0


# (method, the status of its redirect, the request body sent)
REDIRECT_METHODS = [
    ("GET", 301, b""),
    ("HEAD", 301, b""),
    ("POST", 308, b"user=alice&password=hunter2"),
    ("PUT", 308, b"a new page"),
    ("PATCH", 308, b"a change"),
    ("DELETE", 308, b""),
    ("OPTIONS", 308, b""),
]


@pytest.mark.stage(15)
@pytest.mark.parametrize("method, status, body", REDIRECT_METHODS, ids=[m[0] for m in REDIRECT_METHODS])
def test_redirect_keeps_the_method(backend, start_proxy, certs, method, status, body):
    """redirect_http = true: GET and HEAD get a 301, every other method a
    308 (Permanent Redirect) with the same Location. After a 301 a browser
    repeats a POST as a GET and drops its body; after a 308 it repeats the
    request as it was. No backend sees the request, its body included,
    and the next request on the connection gets its own answer."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], redirect_http=True)
    location = f"https://{WWW}:{proxy.tls_port}/login?next=%2Fhome"
    with Conn(proxy.port, host=WWW) as c:
        r = c.request(method, "/login?next=%2Fhome", body=body)
        assert r.status == status, f"{method}: {r!r} {r.raw[:300]!r}"
        assert r.header("Location") == location, r.headers
        if method == "HEAD":
            assert r.body == b"", r.raw[:300]
        else:
            assert r.framing == "length" and r.complete, r
        if "close" not in r.connection_tokens():
            after = c.get("/after")
            assert after.status == 301, after.raw[:300]
            assert after.header("Location") == f"https://{WWW}:{proxy.tls_port}/after", after.headers
    assert backend.requests == 0


@pytest.mark.stage(15)
def test_redirect_to_port_443_names_no_port(fixed_port, backend, start_proxy, certs):
    """With tls.listen on port 443 the Location has no port:
    https://HOST/path?query. (Needs port 443 on 127.0.0.1: waits for the
    other suites' tests using it; skipped where this user may not bind it.)"""
    fixed_port(443)
    proxy = start_proxy(backend, tls={"listen": f"{LOOPBACK}:443", "certificates": [certs.www.entry()],
                                      "redirect_http": True})
    wait_until_listening(443, proxy.process, POLL_TIMEOUT, what="rsp's TLS listener")
    r = get(proxy.port, "/p/q?r=1", host=f"{WWW}:{proxy.port}")
    assert r.status == 301 and r.header("Location") == f"https://{WWW}/p/q?r=1", r.headers
    assert backend.requests == 0


@pytest.mark.stage(15)
def test_redirect_without_host_is_400(backend, start_proxy, certs):
    """redirect_http = true and an HTTP/1.0 request without Host: nowhere
    to redirect to, so rsp's own 400."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], redirect_http=True)
    r = exchange(proxy.port, b"GET /x HTTP/1.0\r\n\r\n")
    assert_rsp_page(r, 400, "Bad Request")
    assert backend.requests == 0


@pytest.mark.stage(15)
def test_redirect_keeps_the_connection(backend, start_proxy, certs):
    """Two pipelined requests on one plain connection: each gets a whole
    301 to its own path; the connection then stays usable (or, if rsp
    said Connection: close, ends cleanly right after the first)."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], redirect_http=True)
    with Conn(proxy.port, host=WWW) as c:
        c.send(c.request_bytes("GET", "/one") + c.request_bytes("GET", "/two?2"))
        first = c.read_response()
        assert first.status == 301 and first.header("Location") == f"https://{WWW}:{proxy.tls_port}/one"
        assert first.framing == "length" and first.complete
        if "close" in first.connection_tokens():
            assert c.closed(), "rsp said Connection: close but kept the connection"
            return
        second = c.read_response()
        assert second.status == 301 and second.header("Location") == f"https://{WWW}:{proxy.tls_port}/two?2"
        r = c.get("/three", headers=[("Connection", "close")])
        assert r.status == 301 and r.header("Location") == f"https://{WWW}:{proxy.tls_port}/three"
    assert backend.requests == 0


@pytest.mark.stage(15)
def test_redirect_head_has_no_body(backend, start_proxy, certs):
    """A HEAD on the plain listener gets the 301's head (Location,
    Content-Length) and not its body: the next request on the connection
    gets its own 301 right after."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], redirect_http=True)
    with Conn(proxy.port, host=WWW) as c:
        head = c.request("HEAD", "/h?1")
        assert head.status == 301 and head.header("Location") == f"https://{WWW}:{proxy.tls_port}/h?1"
        assert int(head.header("Content-Length")) > 0 and head.body == b""
        if "close" in head.connection_tokens():
            assert c.state(POLL_TIMEOUT) == "eof", "after the HEAD's 301 came more than its head"
            return
        r = c.get("/after")
        assert r.status == 301 and r.header("Location") == f"https://{WWW}:{proxy.tls_port}/after", r.raw[:200]
    assert backend.requests == 0


@pytest.mark.stage(15)
def test_no_redirect_over_tls_nor_by_default(backend, start_proxy, certs, ctx):
    """redirect_http = true redirects plain requests only: HTTPS requests
    reach the backend. Without redirect_http (false by default) plain
    requests reach it too."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], redirect_http=True)
    assert_tls_serves(proxy, ctx)
    other = start_tls(start_proxy, backend, certificates=[certs.www])
    assert_serves(other)
    assert backend.hits["/bytes"] == 2


@pytest.mark.stage(15)
def test_redirect_leaves_acme_challenges_to_the_backend(backend, start_proxy, certs):
    """redirect_http = true without acme_webroot: a request under
    /.well-known/acme-challenge/ is not redirected but forwarded (an
    ACME client may answer there itself)."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], redirect_http=True)
    r = get(proxy.port, CHALLENGE + TOKEN, host=WWW)
    assert r.status == 404 and r.header("X-Backend") == "a", f"{r!r} {r.headers}"
    assert backend.hits[CHALLENGE + TOKEN] == 1


# -- acme_webroot ----------------------------------------------------------------------

@pytest.fixture
def webroot(tmp_path):
    """An ACME webroot: DIR/.well-known/acme-challenge/ (empty), and
    secrets around it that must never be served: DIR/secret.txt,
    DIR/.well-known/secret.txt, and one outside DIR."""
    root = tmp_path / "webroot"
    challenges = root / ".well-known" / "acme-challenge"
    challenges.mkdir(parents=True)
    (root / "secret.txt").write_bytes(b"SECRET in the webroot\n")
    (root / ".well-known" / "secret.txt").write_bytes(b"SECRET in .well-known\n")
    (tmp_path / "outside.txt").write_bytes(b"SECRET outside the webroot\n")
    return SimpleNamespace(root=root, challenges=challenges, outside=tmp_path / "outside.txt")


def start_acme(start_proxy, backend, certs, webroot, **options):
    return start_tls(start_proxy, backend, certificates=[certs.www], acme_webroot=str(webroot.root), **options)


def assert_no_secret(r):
    assert b"SECRET" not in r.raw, f"a secret file was served: {r.raw[:300]!r}"


@pytest.mark.stage(15)
def test_acme_challenge_served(backend, start_proxy, certs, ctx, webroot):
    """GET /.well-known/acme-challenge/TOKEN on the plain listener serves
    the file certbot wrote there (made after rsp started): 200,
    Content-Type application/octet-stream, the exact bytes (every byte
    value), its Content-Length; tokens of one character and of the whole
    alphabet too. No backend sees these requests."""
    proxy = start_acme(start_proxy, backend, certs, webroot)
    files = {
        TOKEN: f"{TOKEN}.9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI".encode(),
        "a": b"x",
        "AZaz09_-": bytes(range(256)) + b"\r\n\r\n\x00",
    }
    for name, content in files.items():
        (webroot.challenges / name).write_bytes(content)
    for name, content in files.items():
        r = get(proxy.port, CHALLENGE + name, host=WWW)
        assert r.status == 200, f"{name}: {r!r} {r.raw[:300]!r}"
        assert r.header("Content-Type") == "application/octet-stream", r.headers
        assert r.header("Content-Length") == str(len(content)), r.headers
        assert r.body == content, f"{name}: {r.body[:100]!r}"
    assert backend.requests == 0


@pytest.mark.stage(15)
def test_acme_challenge_head_and_keepalive(backend, start_proxy, certs, webroot):
    """HEAD gives the same status and headers without a body (the next
    response on the connection is read right after the head); a GET on
    the same connection then gets the body."""
    proxy = start_acme(start_proxy, backend, certs, webroot)
    content = b"key-authorization-" + TOKEN.encode()
    (webroot.challenges / TOKEN).write_bytes(content)
    with Conn(proxy.port, host=WWW) as c:
        head = c.request("HEAD", CHALLENGE + TOKEN)
        assert head.status == 200, head
        assert head.header("Content-Length") == str(len(content)), head.headers
        assert head.header("Content-Type") == "application/octet-stream", head.headers
        assert "close" not in head.connection_tokens(), head.headers
        r = c.get(CHALLENGE + TOKEN)
        assert r.status == 200 and r.body == content, f"{r!r} {r.raw[:200]!r}"
        r = c.get("/bytes?n=10")
        assert r.status == 200 and r.header("X-Backend") == "a"
    assert backend.requests == 1


def make_hostile_webroot(webroot):
    """Files under the challenge directory that must not be served."""
    ch = webroot.challenges
    (ch / "tok").write_bytes(b"a valid token that NUL tricks would reach\n")
    (ch / TOKEN).write_bytes(b"the real token\n")
    (ch / "tok.en").write_bytes(b"SECRET with a dot\n")
    (ch / ".hidden").write_bytes(b"SECRET dot file\n")
    (ch / "sub").mkdir()
    (ch / "sub" / "token").write_bytes(b"SECRET in a subdirectory\n")
    (ch / "adir").mkdir()
    os.symlink(ch / TOKEN, ch / "linked")                  # inside the webroot: still not followed
    os.symlink(webroot.outside, ch / "leak")               # outside it
    os.symlink(webroot.root / "secret.txt", ch / "leak2")
    os.symlink(webroot.root, ch / "rootlink")              # a directory
    (ch / "sub2").mkdir()
    os.symlink(webroot.outside, ch / "sub2" / "x")


# (target, whether rsp must answer itself: a path that normalizes to
# somewhere outside the challenge directory may instead reach the backend,
# which answers 404 to every such path too)
HOSTILE_ACME = [
    (CHALLENGE + "nosuchtoken", True),                    # missing
    (CHALLENGE, True),                                    # an empty token
    (CHALLENGE + "tok.en", True),                         # a dot in the name (the file exists)
    (CHALLENGE + ".hidden", True),                        # a dot file
    (CHALLENGE + "sub/token", True),                      # a subdirectory
    (CHALLENGE + "adir", True),                           # a directory
    (CHALLENGE + "adir/", True),
    (CHALLENGE + "tok/", True),                           # a file with a trailing slash
    (CHALLENGE + "linked", True),                         # a symlink to the real token, inside
    (CHALLENGE + "leak", True),                           # a symlink to a file outside the webroot
    (CHALLENGE + "leak2", True),                          # a symlink to the webroot's secret
    (CHALLENGE + "rootlink/secret.txt", True),            # through a symlinked directory
    (CHALLENGE + "sub2/x", True),                         # a symlink in a subdirectory
    (CHALLENGE + "tok%00en", True),                       # an encoded NUL (would open "tok")
    (CHALLENGE + "tok%20", True),                         # an encoded space
    (CHALLENGE + "tok%2Een", True),                       # an encoded dot
    (CHALLENGE + "tok%", True),                           # a lone percent
    (CHALLENGE + "a" * 4000, True),                       # longer than any file name
    (CHALLENGE + "..", False),
    (CHALLENGE + "../../secret.txt", False),
    (CHALLENGE + "../secret.txt", False),
    (CHALLENGE + "%2e%2e/%2e%2e/secret.txt", False),
    (CHALLENGE + "%2E%2E/secret.txt", False),
    (CHALLENGE + ".%2e/.%2e/secret.txt", False),
]

# Encoded slashes under the challenge path (stage 07 answers 400 to an
# encoded slash anywhere unless allow_encoded_slashes; the spec of
# acme_webroot says 404 for these).
ENCODED_SLASHES = [
    CHALLENGE + "sub%2Ftoken",
    CHALLENGE + "sub%2ftoken",
    CHALLENGE + "..%2F..%2Fsecret.txt",
    CHALLENGE + "..%2F..%2F..%2Foutside.txt",
]


def hostile_acme_failures(proxy, backend, ctx, cases):
    """Requests each target of `cases` ((target, by_rsp) pairs): returns
    what went wrong, one line per case. A secret is never served,
    whatever else fails."""
    failures = []
    for target, by_rsp in cases:
        before = backend.requests
        r = get(proxy.port, target, host=WWW)
        assert_no_secret(r)
        problem = None
        if r.status != 404:
            problem = f"status {r.status} {r.raw[:120]!r}"
        elif by_rsp and (r.header("X-Backend") is not None or backend.requests != before):
            problem = "reached the backend"
        elif b"valid token" in r.body or b"the real token" in r.body:
            problem = f"served a file: {r.body[:100]!r}"
        if problem:
            failures.append(f"{target[:80]}: {problem}")
        ok = get(proxy.port, CHALLENGE + TOKEN, host=WWW)
        assert ok.status == 200 and ok.body == b"the real token\n", f"after {target[:80]}: {ok!r}"
        assert_both_serve(proxy, ctx)
    return failures


@pytest.mark.stage(15)
def test_acme_refuses_everything_but_a_token_file(backend, start_proxy, certs, ctx, webroot):
    """Under /.well-known/acme-challenge/ only a regular file whose name
    is a token ([A-Za-z0-9_-]+) is served: a missing one, an empty name,
    dots, subdirectories, directories, symlinks (even to the real token
    inside the webroot), an encoded NUL, space or dot, a lone %, a name
    too long, and dot-dot in every spelling get a 404 (from rsp itself,
    except a dot-dot path that normalizes out of the challenge directory:
    that one may reach the backend, which answers 404), and never a byte
    of another file. After each, the real token and both listeners still
    serve. Every failing case is listed."""
    make_hostile_webroot(webroot)
    proxy = start_acme(start_proxy, backend, certs, webroot)
    failures = hostile_acme_failures(proxy, backend, ctx, HOSTILE_ACME)
    assert not failures, "\n".join(failures)


@pytest.mark.stage(15)
def test_acme_encoded_slash_is_404(backend, start_proxy, certs, ctx, webroot):
    """An encoded slash in a challenge name (sub%2Ftoken, ..%2F..%2F...)
    gets the 404 of any name outside the token alphabet, from rsp, and
    never a file."""
    make_hostile_webroot(webroot)
    proxy = start_acme(start_proxy, backend, certs, webroot)
    failures = hostile_acme_failures(proxy, backend, ctx, [(target, True) for target in ENCODED_SLASHES])
    assert not failures, "\n".join(failures)


@pytest.mark.stage(15)
def test_acme_fifo_does_not_hang(backend, start_proxy, certs, ctx, webroot):
    """A FIFO named like a token: rsp answers 404 at once (it must not
    block opening or reading it: that would stop the whole reactor), and
    serves everyone meanwhile."""
    fifo = webroot.challenges / "fifotoken"
    os.mkfifo(fifo)
    proxy = start_acme(start_proxy, backend, certs, webroot)
    try:
        r = get(proxy.port, CHALLENGE + "fifotoken", host=WWW, timeout=POLL_TIMEOUT)
        assert r.status == 404, f"{r!r} {r.raw[:300]!r}"
        assert_both_serve(proxy, ctx)
    finally:
        # Should rsp be stuck opening the FIFO for reading, a writer
        # lets it go (so that the teardown sees it, not a hang).
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass


@pytest.mark.stage(15)
def test_acme_other_methods_405(backend, start_proxy, certs, ctx, webroot):
    """POST, PUT, DELETE, OPTIONS and PATCH on a challenge path (an
    existing token or not): 405 with Allow: GET, HEAD; no backend sees
    them; the proxy serves normally after each."""
    (webroot.challenges / TOKEN).write_bytes(b"token\n")
    proxy = start_acme(start_proxy, backend, certs, webroot)
    for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH"):
        for name in (TOKEN, "missingtoken"):
            r = request(proxy.port, CHALLENGE + name, method=method, host=WWW,
                        body=b"hello" if method in ("POST", "PUT", "PATCH") else b"")
            assert r.status == 405, f"{method} {name}: {r!r} {r.raw[:300]!r}"
            allowed = [m.strip() for m in (r.header("Allow") or "").split(",")]
            assert allowed == ["GET", "HEAD"], f"{method}: {r.headers}"
            assert backend.requests == 0, f"{method} {name} reached the backend"
            assert_both_serve(proxy, ctx)
            backend.hits.clear()


@pytest.mark.stage(15)
def test_acme_only_under_the_challenge_path(backend, start_proxy, certs, webroot):
    """Only /.well-known/acme-challenge/... is rsp's: /.well-known/other,
    /.well-known/acme-challengeX/TOKEN and ordinary paths go to the
    backend as usual."""
    (webroot.challenges / TOKEN).write_bytes(b"token\n")
    proxy = start_acme(start_proxy, backend, certs, webroot)
    for path in ("/.well-known/other", f"/.well-known/acme-challengeX/{TOKEN}", f"/acme-challenge/{TOKEN}"):
        r = get(proxy.port, path, host=WWW)
        assert r.status == 404 and r.header("X-Backend") == "a", f"{path}: {r!r}"
    assert_serves(proxy)
    assert backend.requests == 4


@pytest.mark.stage(15)
def test_acme_with_redirect_http(backend, start_proxy, certs, ctx, webroot):
    """redirect_http and acme_webroot together (the usual setup): a token
    is served on the plain listener, a missing token is a 404 (not a
    redirect), everything else a 301 to HTTPS, where it is served."""
    (webroot.challenges / TOKEN).write_bytes(b"token\n")
    proxy = start_acme(start_proxy, backend, certs, webroot, redirect_http=True)
    r = get(proxy.port, CHALLENGE + TOKEN, host=WWW)
    assert r.status == 200 and r.body == b"token\n", r
    r = get(proxy.port, CHALLENGE + "missing", host=WWW)
    assert r.status == 404 and r.header("Location") is None, r.headers
    r = get(proxy.port, "/bytes?n=10", host=WWW)
    assert r.status == 301 and r.header("Location") == f"https://{WWW}:{proxy.tls_port}/bytes?n=10"
    assert backend.requests == 0
    assert_tls_serves(proxy, ctx)


# -- the handshake on the reactor: stalls and garbage ---------------------------------------------

def serve_meanwhile(proxy, ctx, count=2):
    for i in range(count):
        assert_serves(proxy, 1000 + i)
        assert_tls_serves(proxy, ctx, 2000 + i)


def test_silent_tls_client_closed_after_header_timeout(backend, start_proxy, certs, ctx):
    """A client that connects to the TLS port and says nothing is closed
    after header_timeout (not before), without a byte; plain and TLS
    clients are served meanwhile."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], header_timeout=TIMEOUT)
    silent = Ending(proxy.tls_port)
    serve_meanwhile(proxy, ctx)
    received, reset, elapsed = silent.result()
    assert received == b"", f"a silent TLS client got {received[:100]!r}"
    assert not reset, "the silent connection was reset instead of closed"
    assert elapsed >= NOT_BEFORE, f"closed after {elapsed:.2f} s with header_timeout {TIMEOUT} s"


def complete_handshake(sock, hello_state):
    """finish_server_flight, then sends the client's last flight: the
    handshake is complete, and the client says nothing more."""
    finish_server_flight(sock, hello_state)
    sock.sendall(hello_state[2].read())


@pytest.mark.parametrize("where", ["half-client-hello", "one-byte", "after-server-flight", "handshake-done"])
def test_handshake_stalled_midway_closed_after_header_timeout(backend, start_proxy, certs, ctx, where):
    """A client that stops in the middle of the handshake (after half a
    ClientHello, after its first byte, or after the server's first flight
    without sending its Finished), or right after a complete handshake,
    is closed after header_timeout, not before; others are served
    meanwhile; no backend sees anything from it."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], header_timeout=TIMEOUT)
    hello, state = client_hello(WWW)
    if where == "half-client-hello":
        stalled = Ending(proxy.tls_port, hello[:len(hello) // 2])
    elif where == "one-byte":
        stalled = Ending(proxy.tls_port, hello[:1])
    elif where == "after-server-flight":
        stalled = Ending(proxy.tls_port, hello, then=lambda sock: finish_server_flight(sock, state))
    else:
        stalled = Ending(proxy.tls_port, hello, then=lambda sock: complete_handshake(sock, state))
    serve_meanwhile(proxy, ctx)
    _, _, elapsed = stalled.result()
    assert elapsed >= NOT_BEFORE, f"closed after {elapsed:.2f} s with header_timeout {TIMEOUT} s"
    assert backend.hits["/bytes"] == 4 and backend.requests == 4


def test_trickled_handshake_completes(backend, start_proxy, certs, ca):
    """A client whose every handshake message arrives in 7-byte pieces,
    10 ms apart, gets through the handshake (rsp waits for more as often
    as it takes) and is served."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], header_timeout=LONG)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ca.client_context().wrap_bio(incoming, outgoing, server_hostname=WWW)
    with connect(proxy.tls_port, timeout=POLL_TIMEOUT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def flush():
            data = outgoing.read()
            for i in range(0, len(data), 7):
                sock.sendall(data[i:i + 7])
                time.sleep(0.01)

        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                flush()
                data = sock.recv(65536)
                assert data, "rsp closed the connection during a trickled handshake"
                incoming.write(data)
        flush()
        obj.write(request_bytes("GET", "/bytes?n=3000", [("Connection", "close")], host=WWW))
        flush()
        received = bytearray()
        while True:
            try:
                received += obj.read(65536)
            except ssl.SSLWantReadError:
                data = sock.recv(65536)
                if not data:
                    break
                incoming.write(data)
            except ssl.SSLZeroReturnError:
                break
            if received.endswith(pattern(3000)[-50:]):
                break
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:100]
    assert_is_pattern(body, 3000)


def test_clients_leaving_mid_handshake_or_response_leave_nothing(backend, start_proxy, certs, ctx):
    """Clients that go away in the middle of the TLS handshake (after part
    of a ClientHello, or after the server's first flight; with a FIN or a
    reset), and clients that go away in the middle of a 4 MiB response
    over TLS (FIN or reset): rsp notices each at once (header_timeout is
    30 s, so no timeout does it), holds no more fds than at the start,
    and serves others."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], header_timeout=LONG)
    hello, _ = client_hello(WWW)
    for i in range(40):
        sock = connect(proxy.tls_port)
        if i % 4 == 0:
            sock.sendall(hello[:len(hello) // 3])
        elif i % 4 == 1:
            sock.sendall(hello)
        elif i % 4 == 2:
            state = client_hello(WWW)
            sock.sendall(state[0])
            finish_server_flight(sock, state[1])
        if i % 2:
            close_with_reset(sock)
        else:
            sock.close()
    for i in range(8):
        c = TLSConn(proxy.tls_port, ctx, WWW)
        c.send(c.request_bytes("GET", f"/bytes?n={4 * MiB}"))
        c.reader.until(b"\r\n\r\n")
        c.reader.exactly(100000)
        if i % 2:
            close_with_reset(c.sock)
        else:
            c.close()
    wait_idle(proxy, timeout=POLL_TIMEOUT)
    assert_both_serve(proxy, ctx)


def random_junk(seed, size):
    """size random bytes whose first is not 0x16 (a TLS handshake record)
    nor 0x80 (an SSLv2-style hello): no length field to wait on."""
    data = bytearray(random.Random(seed).randbytes(size))
    if data[0] in (0x16, 0x80, 0x15, 0x17, 0x14):
        data[0] = 0x47
    return bytes(data)


GARBAGE = [
    ("plain-http", b"GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n"),
    ("plain-http-big", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000),
    ("random", random_junk(1, 2000)),
    ("zeros", b"\x00" * 64),
    ("bad-record-version", b"\x16\x09\x09\x00\x10" + b"\x01" * 16),
    ("hello-then-junk", None),   # a real ClientHello's record header with junk as its body
    ("ssl2-hello", bytes.fromhex("802e" "01" "0002" "0015" "0000" "0010"   # length 46, CLIENT-HELLO, SSL 2.0
                                  "0700c0050080030080010080060040040080020080"   # 7 cipher specs
                                  "5e7d3a1b9c8e1f205e7d3a1b9c8e1f20")),          # the challenge
]


@pytest.mark.parametrize("data", [g[1] for g in GARBAGE], ids=[g[0] for g in GARBAGE])
def test_garbage_on_the_tls_port(backend, start_proxy, certs, ctx, data):
    """Bytes that are not TLS (plain HTTP, random bytes, a record of an
    unknown version, a ClientHello whose body is junk, an SSLv2 hello)
    end the connection promptly (no timeout is involved: header_timeout
    is 30 s), at most with a TLS alert and never with an HTTP answer; no
    backend sees anything; everyone else is served."""
    if data is None:
        hello, _ = client_hello(WWW)
        data = hello[:5] + random_junk(2, len(hello) - 5)
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], header_timeout=LONG)
    received, _, _ = Ending(proxy.tls_port, data).result()
    assert b"HTTP/" not in received, f"an HTTP answer on the TLS port: {received[:200]!r}"
    if received:
        assert received[0] == 0x15, f"rsp answered garbage with something else than an alert: {received[:50]!r}"
    assert backend.requests == 0
    assert_both_serve(proxy, ctx)


def test_many_hostile_tls_clients_do_not_disturb_others(backend, start_proxy, certs, ctx):
    """50 clients stalled in the handshake (silent, or after half a
    ClientHello) and 200 sending garbage, all at once: a normal TLS client
    making 30 requests (new connections and a kept one) and a plain one
    are served the whole time; the stalled are closed after
    header_timeout; afterwards rsp holds no more fds than at the start.
    The failed handshakes do not flood the log (at most a line a second)."""
    skip_without_fds(1000)
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], header_timeout=1.5)
    started = time.monotonic()
    hello, _ = client_hello(WWW)
    stalled = [Ending(proxy.tls_port, b"" if i % 2 else hello[:len(hello) // 2]) for i in range(50)]
    payloads = [g[1] for g in GARBAGE if g[1] is not None]
    failures = []

    def garbage(i):
        try:
            Ending(proxy.tls_port, payloads[i % len(payloads)] if i % 7 else random_junk(i, 3000)).result(
                bound=FIRED_BY + 3)
        except (AssertionError, OSError) as e:
            failures.append(f"garbage client {i}: {e!r}")

    with ThreadPoolExecutor(40) as pool:
        hostile = [pool.submit(garbage, i) for i in range(200)]
        with TLSConn(proxy.tls_port, ctx, WWW) as kept:
            for i in range(15):
                assert_tls_serves(proxy, ctx, 3000 + i)
                r = kept.get(f"/bytes?n={100 + i}")
                assert r.status == 200
                assert_is_pattern(r.body, 100 + i)
                assert_serves(proxy, 500 + i)
        for f in hostile:
            f.result()
    assert not failures, "\n".join(failures[:10])
    for s in stalled:
        s.result(bound=FIRED_BY + 3)
    elapsed = time.monotonic() - started
    wait_idle(proxy, timeout=10)
    assert backend.requests == 45
    said = [line for line in proxy.stderr().splitlines() if "handshake" in line]
    assert len(said) <= elapsed + 2, f"{len(said)} log lines about handshakes in {elapsed:.1f} s: {said[:5]}"


# -- bodies over TLS ------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 16383, 16384, 16385, MiB, 16 * MiB],
                         ids=["0", "1", "record-1", "record", "record+1", "1MiB", "16MiB"])
def test_download_byte_exact(backend, start_proxy, certs, ctx, size):
    """A response body of `size` bytes (around one TLS record of 16 KiB,
    1 MiB, 16 MiB) arrives over TLS exactly: same length, same SHA-256."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    r = https_get(proxy.tls_port, f"/bytes?n={size}", ctx, WWW)
    assert r.status == 200 and r.complete, r
    assert len(r.body) == size
    assert hashlib.sha256(r.body).hexdigest() == hashlib.sha256(pattern(size)).hexdigest()


@pytest.mark.parametrize("size", [1, 16385, MiB, 16 * MiB], ids=["1", "record+1", "1MiB", "16MiB"])
def test_upload_byte_exact(backend, start_proxy, stage, certs, ctx, size):
    """A request body of `size` bytes sent over TLS reaches the backend
    exactly (its byte count and SHA-256 as the backend computed them)."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], **large_bodies(stage))
    body = pattern(size, offset=7)
    r = https_request(proxy.tls_port, "/upload", ctx, WWW, method="POST", body=body)
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    assert r.json() == {"received": size, "sha256": hashlib.sha256(body).hexdigest()}


def test_slow_reader_gets_everything(backend, start_proxy, certs, ctx):
    """A TLS client that asks for 16 MiB and then reads nothing for 1.5 s,
    then reads in small pieces, gets every byte; meanwhile rsp's memory
    stays bounded (it stops reading from the backend rather than
    buffering the body: backpressure through the TLS layer) and it serves
    others."""
    size = 16 * MiB
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    sock = tls_connect(proxy.tls_port, ctx, WWW, rcvbuf=16 * KiB)
    with sock:
        sock.sendall(request_bytes("GET", f"/bytes?n={size}", [("Connection", "close")], host=WWW))
        before = vm_rss(proxy.pid)
        highest = before
        for _ in range(6):
            time.sleep(0.25)
            highest = max(highest, vm_rss(proxy.pid))
        assert_both_serve(proxy, ctx)
        if not is_sanitized(proxy.binary):
            growth = highest - before
            assert growth < 8 * MiB, f"rsp's RSS grew by {growth / MiB:.1f} MiB while the client did not read"
        reader = Reader(sock)
        head = reader.until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head[:100]
        body = bytearray(reader.take(len(reader.buf)))
        reads = 0
        while len(body) < size:
            chunk = sock.recv(4096 if reads < 300 else 262144)
            assert chunk, f"the connection ended after {len(body)} of {size} body bytes"
            body += chunk
            reads += 1
            if reads < 300 and reads % 10 == 0:
                time.sleep(0.002)
    assert len(body) == size
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(pattern(size)).hexdigest()


# -- keep-alive and pipelining over TLS ---------------------------------------------------------

def test_keepalive_over_tls(make_keepalive_backend, start_proxy, certs, ctx):
    """Twenty requests of every kind on one TLS connection (GETs with a
    Content-Length or chunked, POSTs with bodies, a HEAD) are each
    answered in full, in order, and the connection is still open after
    them."""
    backend = make_keepalive_backend("a")
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    with TLSConn(proxy.tls_port, ctx, WWW) as c:
        for i in range(20):
            kind = i % 5
            if kind == 0:
                r = c.get(f"/cl?size={i * 1000}")
                assert r.status == 200
                assert_is_pattern(r.body, i * 1000)
            elif kind == 1:
                body = pattern(20000 + i)
                r = c.request("POST", "/echo", body=body)
                assert r.status == 200
                assert (r.json()["body_length"], r.json()["body_sha256"]) == \
                    (len(body), hashlib.sha256(body).hexdigest())
            elif kind == 2:
                r = c.request("HEAD", "/cl?size=5000")
                assert r.status == 200 and r.header("Content-Length") == "5000" and r.body == b""
            elif kind == 3:
                r = c.get(f"/chunked?size={40000 + i}&chunks=7")
                assert r.status == 200 and r.framing == "chunked" and r.complete
                assert_is_pattern(r.decoded, 40000 + i)
            else:
                r = c.get(f"/echo?i={i}")
                assert r.json()["target"] == f"/echo?i={i}"
        assert c.is_open(0.2), "the TLS connection ended after 20 requests"
    assert backend.requests == 20


def test_pipelined_requests_over_tls(backend, start_proxy, certs, ctx):
    """Three requests sent at once (one write, so that they arrive in one
    TLS record, and rsp must answer the ones OpenSSL already decrypted
    without waiting for more from the socket), then three more each in a
    record of its own sent together: six responses, in order."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    with TLSConn(proxy.tls_port, ctx, WWW, timeout=POLL_TIMEOUT) as c:
        c.send(b"".join(c.request_bytes("GET", f"/echo?n={i}") for i in range(3)))
        for i in range(3):
            r = c.read_response()
            assert r.status == 200 and r.json()["path"] == f"/echo?n={i}", r
        body = pattern(30000)
        c.send(c.request_bytes("GET", "/echo?n=3") + c.request_bytes("POST", "/upload", body=body)
               + c.request_bytes("GET", "/bytes?n=70000"))
        assert c.read_response().json()["path"] == "/echo?n=3"
        assert c.read_response().json() == {"received": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        r = c.read_response()
        assert_is_pattern(r.body, 70000)


def test_idle_tls_connection_closed_after_keepalive_timeout(backend, start_proxy, certs, ctx):
    """An idle keep-alive TLS connection is closed after keepalive_timeout
    (cleanly: no reset); the proxy's fds go back to their start count."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], keepalive_timeout=TIMEOUT)
    with TLSConn(proxy.tls_port, ctx, WWW) as c:
        assert c.get("/bytes?n=10").status == 200
        assert c.state(FIRED_BY) == "eof", "the idle TLS connection was not closed cleanly"
    wait_idle(proxy, timeout=POLL_TIMEOUT)


def test_connection_close_ends_with_close_notify(backend, start_proxy, certs, ctx):
    """A response to a request with Connection: close ends with a TLS
    close_notify before the TCP close, so the client can tell the end
    from a truncation (the client here treats an EOF without it as an
    error)."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    with TLSConn(proxy.tls_port, ctx, WWW, suppress_ragged_eofs=False) as c:
        r = c.get("/bytes?n=5000", headers=[("Connection", "close")])
        assert r.status == 200
        assert_is_pattern(r.body, 5000)
        try:
            rest = c.sock.recv(100)
        except ssl.SSLEOFError:
            pytest.fail("the connection ended without a close_notify")
        assert rest == b"", rest


def test_request_in_one_byte_records(backend, start_proxy, certs, ctx):
    """A request whose head comes one byte per TLS record, and whose body
    comes in 7-byte records: rsp gathers them and the backend gets the
    whole request."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    body = pattern(300, offset=3)
    data = request_bytes("POST", "/upload", [("Connection", "close")], body, host=WWW)
    head_length = data.index(b"\r\n\r\n") + 4
    with tls_connect(proxy.tls_port, ctx, WWW) as sock:
        for i in range(head_length):
            sock.sendall(data[i:i + 1])
        for i in range(head_length, len(data), 7):
            sock.sendall(data[i:i + 7])
        r = read_framed_response(Reader(sock))
    assert r.status == 200, f"{r!r} {r.raw[:300]!r}"
    assert r.json() == {"received": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def test_close_delimited_body_ends_with_close_notify(make_keepalive_backend, start_proxy, certs, ctx):
    """An HTTP/1.0 client over TLS, a backend body delimited by its close:
    rsp relays it until the end and then sends a close_notify, the only
    way such a client can tell the whole body from a truncated one (the
    client here treats an EOF without it as an error)."""
    backend = make_keepalive_backend("a")
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    size = 300000
    with tls_connect(proxy.tls_port, ctx, WWW, suppress_ragged_eofs=False) as sock:
        sock.sendall(request_bytes("GET", f"/close-delimited?size={size}", version="1.0", host=WWW))
        data = bytearray()
        while True:
            try:
                chunk = sock.recv(262144)
            except ssl.SSLEOFError:
                pytest.fail(f"the connection ended without a close_notify after {len(data)} bytes")
            if not chunk:
                break
            data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1."), head[:100]
    assert b" 200 " in head.split(b"\r\n")[0], head[:100]
    assert_is_pattern(body, size)


# -- WebSocket over TLS (wss) ------------------------------------------------------------

class TLSWebSocketClient(WebSocketClient):
    """websocket.WebSocketClient over a TLSConn: the opening handshake is
    sent at once; `response` is the answer."""

    def __init__(self, port, ctx, server_name, path="/ws"):
        self.conn = TLSConn(port, ctx, server_name)
        self.key = base64.b64encode(os.urandom(16)).decode("ascii")
        try:
            self.conn.send(self.conn.request_bytes("GET", path, [
                ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                ("Sec-WebSocket-Key", self.key), ("Sec-WebSocket-Version", "13")]))
            self.response = self.conn.read_response()
        except BaseException:
            self.conn.close()
            raise


@pytest.fixture
def ws_backend():
    backend = WebSocketBackend()
    yield backend
    backend.stop()


def open_wss(proxy, ctx):
    ws = TLSWebSocketClient(proxy.tls_port, ctx, WWW)
    assert ws.upgraded(), f"no upgrade over TLS: {ws.response!r} {ws.response.raw[:300]!r}"
    return ws


def test_websocket_over_tls(ws_backend, start_proxy, certs, ctx):
    """wss://: the upgrade over TLS gets the 101 with the right
    Sec-WebSocket-Accept; messages of every length form (up to 1 MiB,
    some fragmented) come back exactly; a ping gets its pong; the close
    handshake ends the tunnel cleanly."""
    proxy = start_tls(start_proxy, ws_backend, certificates=[certs.www])
    sizes = [0, 1, 125, 126, 65535, 65536, 65537, MiB]
    with open_wss(proxy, ctx) as ws:
        for i, size in enumerate(sizes):
            payload = pattern(size, offset=i)
            ws.send_message(payload, BINARY, fragment=70000 if size > 100000 else None)
            opcode, got = ws.recv_message()
            assert opcode == BINARY and len(got) == size and got == payload, f"message {i} ({size} bytes)"
        pong = ws.ping(b"over tls")
        assert pong.opcode == PONG and pong.payload == b"over tls"
        reply = ws.close(1000)
        assert reply.opcode == CLOSE and reply.payload[:2] == (1000).to_bytes(2, "big"), reply
        assert ws.conn.closed(FIRED_BY), "the tunnel did not end after the close handshake"
    assert ws_backend.messages == len(sizes) and not ws_backend.errors, ws_backend.errors


def pump(sock, out, want, timeout=60.0):
    """Sends `out` and reads `want` bytes at the same time on a TLS socket
    (one thread, non-blocking: an SSLSocket must not be read and written
    from two threads); returns what was read."""
    sock.setblocking(False)
    sent, got = 0, bytearray()
    deadline = time.monotonic() + timeout
    try:
        while sent < len(out) or len(got) < want:
            assert time.monotonic() < deadline, f"stuck after sending {sent} of {len(out)} and reading {len(got)}"
            readable, writable, _ = select.select([sock], [sock] if sent < len(out) else [], [], 0.5)
            if readable or sock.pending():
                try:
                    while True:
                        chunk = sock.recv(262144)
                        assert chunk, f"the connection ended after {len(got)} of {want} bytes"
                        got += chunk
                        if not sock.pending():
                            break
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
            if writable and sent < len(out):
                try:
                    sent += sock.send(out[sent:sent + 65536])
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
    finally:
        sock.setblocking(True)
        sock.settimeout(POLL_TIMEOUT)
    return bytes(got)


def test_websocket_over_tls_both_ways_at_once(ws_backend, start_proxy, certs, ctx):
    """Ten 1 MiB messages sent over wss without waiting for their echoes
    (the echoes come back while the client still sends): all come back
    exactly, in order. The tunnel moves both directions at once through
    the TLS layer."""
    proxy = start_tls(start_proxy, ws_backend, certificates=[certs.www])
    with open_wss(proxy, ctx) as ws:
        out = b"".join(encode_frame(BINARY, pattern(MiB, offset=i), mask=os.urandom(4)) for i in range(10))
        echo_size = len(encode_frame(BINARY, pattern(MiB)))
        data = bytes(ws.conn.reader.take(len(ws.conn.reader.buf)))
        data += pump(ws.conn.sock, out, 10 * echo_size - len(data))
        at = 0

        def exactly(n):
            nonlocal at
            piece = data[at:at + n]
            assert len(piece) == n, "a truncated frame"
            at += n
            return piece

        for i in range(10):
            frame = read_frame(exactly)
            assert frame.opcode == BINARY and frame.fin, frame
            assert frame.payload == pattern(MiB, offset=i), f"echo {i} differs"
        assert ws.close().opcode == CLOSE
    assert ws_backend.messages == 10


# -- reloads ------------------------------------------------------------------------------

def rewrite_config(rsp, proxy, tmp_path, backends, **options):
    (path,) = proxy_arguments(rsp.stage, proxy.port, [backend_address(b) for b in backends], str(tmp_path),
                              options)
    assert path == proxy.args[0]


def test_reload_picks_up_a_renewed_certificate(backend, start_proxy, rsp, ca, ctx, tmp_path):
    """The certificate and key files are rewritten in place with a new
    certificate (a renewal) and rsp gets SIGHUP: new connections get the
    new certificate from the same process; a keep-alive TLS connection
    opened before goes on working. A reload that brings a key not
    matching the certificate fails (logged) and new connections keep
    getting the certificate in use."""
    live = tmp_path / "live"
    live.mkdir()
    old = ca.issue(live, "cert", [WWW])
    proxy = start_tls(start_proxy, backend, certificates=[old])
    pid = proxy.pid
    with TLSConn(proxy.tls_port, ctx, WWW) as kept:
        assert kept.get("/bytes?n=10").status == 200
        assert kept.peer_fingerprint == old.fingerprint
        new = ca.issue(tmp_path, "renewed", [WWW])
        new.write_over(old)
        sighup(proxy, 2)
        r = https_get(proxy.tls_port, "/bytes?n=10", ctx, WWW)
        assert r.status == 200
        assert r.peer_fingerprint == new.fingerprint, "a new connection after the reload got the old certificate"
        assert r.peer_cert.serial_number == new.serial
        assert proxy.pid == pid and proxy.alive()
        for i in range(3):
            r = kept.get(f"/bytes?n={100 + i}")
            assert r.status == 200, f"the kept connection failed after the reload: {r!r}"
            assert_is_pattern(r.body, 100 + i)
        other = ca.issue(tmp_path, "other", ["other.test"])
        with open(other.key, "rb") as f, open(old.key, "wb") as g:
            g.write(f.read())
        lines = sighup_failing(proxy)
        assert any("reload failed" in line for line in lines), lines
        assert https_get(proxy.tls_port, "/bytes?n=10", ctx, WWW).peer_fingerprint == new.fingerprint
        assert kept.get("/bytes?n=10").status == 200


def test_reload_adds_a_certificate_and_hsts(backend, start_proxy, rsp, certs, ca, any_name_ctx, tmp_path):
    """A reload whose config adds a second certificate and (from stage 15)
    sets hsts: new connections with that SNI get it, and responses carry
    the header."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    assert handshake_only(proxy.tls_port, any_name_ctx, "other.test").peer_fingerprint == certs.www.fingerprint
    tls = {"listen": f"{LOOPBACK}:{proxy.tls_port}", "certificates": [certs.www.entry(), certs.other.entry()]}
    if rsp.stage >= 15:
        tls["hsts"] = 600
    rewrite_config(rsp, proxy, tmp_path, [backend], tls=tls)
    sighup(proxy, 2)
    r = https_get(proxy.tls_port, "/bytes?n=10", any_name_ctx, "other.test")
    assert r.peer_fingerprint == certs.other.fingerprint
    assert sts(r) == (["max-age=600"] if rsp.stage >= 15 else []), r.headers
    assert handshake_only(proxy.tls_port, any_name_ctx, WWW).peer_fingerprint == certs.www.fingerprint


def test_handshake_across_reloads(backend, start_proxy, rsp, certs, any_name_ctx, tmp_path):
    """Connections accepted before two reloads that each change the
    certificates (one silent, one that sent half a ClientHello) do their
    handshake after them: they complete (with the certificates of the
    generation that accepted them, which they hold) and are served; new
    connections get the newest certificates. Nothing crashes (run it on a
    sanitizer build too)."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www, certs.other], header_timeout=LONG)
    base = count_fds(proxy.pid)
    silent = connect(proxy.tls_port)
    half = connect(proxy.tls_port)
    hello, (obj, incoming, outgoing) = client_hello("other.test")
    half.sendall(hello[:len(hello) // 2])
    wait_for(lambda: count_fds(proxy.pid) >= base + 2, "rsp accepted both connections", POLL_TIMEOUT)
    try:
        for generation, chosen in ((2, [certs.wild]), (3, [certs.default])):
            rewrite_config(rsp, proxy, tmp_path, [backend], header_timeout=LONG,
                           tls={"listen": f"{LOOPBACK}:{proxy.tls_port}", "certificates": [c.entry() for c in chosen]})
            sighup(proxy, generation)
        with any_name_ctx.wrap_socket(silent, server_hostname="other.test") as s:
            assert s.getpeercert(binary_form=True) is not None
            s.sendall(request_bytes("GET", "/bytes?n=100", [("Connection", "close")], host="other.test"))
            r = read_framed_response(Reader(s))
            assert r.status == 200
            assert_is_pattern(r.body, 100)
        half.sendall(hello[len(hello) // 2:])
        half.settimeout(POLL_TIMEOUT)
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                data = half.recv(65536)
                assert data, "rsp closed the half-hello connection after the reloads"
                incoming.write(data)
        half.sendall(outgoing.read())
        assert obj.getpeercert(binary_form=True) is not None
        assert https_get(proxy.tls_port, "/bytes?n=10", any_name_ctx, "other.test").peer_fingerprint == \
            certs.default.fingerprint
    finally:
        silent.close()
        half.close()


def test_reload_renews_the_certificate_in_every_worker(make_backend, start_proxy, ca, ctx, tmp_path):
    """workers = 2: after the files are rewritten in place and SIGHUP,
    each worker (a connection put on each by stopping the other) presents
    the new certificate (polled, bounded: the master logs the reload
    before the workers have it)."""
    backend = make_backend("a")
    old = ca.issue(tmp_path, "cert", [WWW])
    proxy = start_tls(start_proxy, backend, certificates=[old], workers=2)
    pids = started_workers(proxy, 2)
    for pid in pids:
        with tls_conn_on_worker(proxy, ctx, pid, pids) as c:
            assert c.peer_fingerprint == old.fingerprint
    new = ca.issue(tmp_path, "renewed", [WWW])
    new.write_over(old)
    sighup(proxy, 2)
    for pid in pids:
        deadline = time.monotonic() + POLL_TIMEOUT
        while True:
            with tls_conn_on_worker(proxy, ctx, pid, pids) as c:
                seen = c.peer_fingerprint
                assert c.get("/bytes?n=10").status == 200
            if seen == new.fingerprint or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert seen == new.fingerprint, f"worker {pid} still presents the old certificate after the reload"


def test_sigterm_with_tls_connections(backend, start_proxy, certs, ctx):
    """SIGTERM with a slow response in flight over TLS and an idle TLS
    keep-alive connection: the idle one is closed, the response arrives
    whole (it ends, with Connection: close, and then the connection
    does), and rsp exits with status 0."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    idle = TLSConn(proxy.tls_port, ctx, WWW)
    busy = TLSConn(proxy.tls_port, ctx, WWW)
    try:
        assert idle.get("/bytes?n=10").status == 200
        busy.send(busy.request_bytes("GET", "/drip?chunks=10&size=1000&delay=0.1"))
        assert busy.wait_for_data(POLL_TIMEOUT), "the slow response did not start"
        proxy.process.send_signal(signal.SIGTERM)
        r = busy.read_response()
        assert r.status == 200 and r.complete, f"{r!r} {r.raw[:300]!r}"
        assert_is_pattern(r.body, 10000)
        assert busy.state(POLL_TIMEOUT) == "eof", "the busy TLS connection did not end after its response"
        assert idle.state(POLL_TIMEOUT) == "eof", "the idle TLS connection was not closed"
    finally:
        idle.close()
        busy.close()
    assert proxy.wait_exit(POLL_TIMEOUT) == 0


# -- config errors --------------------------------------------------------------------------

LISTEN_PORT = 18080   # written into the configs of -t checks only: never bound
TLS_PORT = 18443
B = (LOOPBACK, 8001)


@pytest.fixture(scope="module")
def files(ca, tmp_path_factory):
    """Files the config tests point at."""
    d = tmp_path_factory.mktemp("tlsfiles")
    good = ca.issue(d, "good", [WWW])
    second = ca.issue(d, "second", ["other.test"])
    expired = ca.issue(d, "expired", ["old.example.test"], not_after=EXPIRED_AT)
    encrypted = ca.issue(d, "encrypted", [WWW], passphrase=b"secret")
    not_pem = d / "not.pem"
    not_pem.write_text("this is not a PEM file\n")
    empty = d / "empty.pem"
    empty.write_text("")
    adir = d / "adir"
    adir.mkdir()
    afile = d / "afile"
    afile.write_text("x")
    return SimpleNamespace(good=good, second=second, expired=expired, encrypted=encrypted, not_pem=str(not_pem),
                           empty=str(empty), missing=str(d / "missing.pem"), dir=str(adir), file=str(afile))


def tls_table(f, **fields):
    table = {"listen": TLS_PORT, "certificates": [f.good.entry()]}
    for name, value in fields.items():
        if value is None:
            table.pop(name, None)
        else:
            table[name] = value
    return table


# (id, function of `files` giving the options, the setting the line names
# (None: checked by the test), words the line must hold)
TLS_ERRORS = [
    ("cert-missing", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.missing, "key": f.good.key}])},
     "tls.certificates[1].cert", ()),
    ("key-missing", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.good.cert, "key": f.missing}])},
     "tls.certificates[1].key", ()),
    ("second-cert-missing", lambda f: {"tls": tls_table(f, certificates=[
        f.good.entry(), {"cert": f.missing, "key": f.second.key}])}, "tls.certificates[2].cert", ()),
    ("cert-not-pem", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.not_pem, "key": f.good.key}])},
     "tls.certificates[1].cert", ()),
    ("cert-empty", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.empty, "key": f.good.key}])},
     "tls.certificates[1].cert", ()),
    ("cert-directory", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.dir, "key": f.good.key}])},
     "tls.certificates[1].cert", ()),
    ("key-not-pem", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.good.cert, "key": f.not_pem}])},
     "tls.certificates[1].key", ()),
    ("key-encrypted", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.encrypted.cert,
                                                                    "key": f.encrypted.key}])},
     "tls.certificates[1].key", ()),
    ("cert-field-missing", lambda f: {"tls": tls_table(f, certificates=[{"key": f.good.key}])},
     "tls.certificates[1].cert", ()),
    ("key-field-missing", lambda f: {"tls": tls_table(f, certificates=[{"cert": f.good.cert}])},
     "tls.certificates[1].key", ()),
    ("entry-not-a-table", lambda f: {"tls": tls_table(f, certificates=[f.good.cert])}, "tls.certificates[1]", ()),
    ("entry-unknown-field", lambda f: {"tls": tls_table(f, certificates=[dict(f.good.entry(), chain=f.good.cert)])},
     None, ("tls.certificates[1]", "chain")),
    ("certificates-empty", lambda f: {"tls": tls_table(f, certificates=[])}, "tls.certificates", ()),
    ("certificates-missing", lambda f: {"tls": tls_table(f, certificates=None)}, "tls.certificates", ()),
    ("certificates-string", lambda f: {"tls": tls_table(f, certificates=f.good.cert)}, "tls.certificates", ()),
    ("listen-missing", lambda f: {"tls": tls_table(f, listen=None)}, "tls.listen", ()),
    ("listen-same-as-listen", lambda f: {"tls": tls_table(f, listen=f"{LOOPBACK}:{LISTEN_PORT}")}, "tls.listen",
     ()),
    ("listen-same-port", lambda f: {"tls": tls_table(f, listen=LISTEN_PORT)}, "tls.listen", ()),
    ("listen-port-too-big", lambda f: {"tls": tls_table(f, listen=70000)}, "tls.listen", ()),
    ("listen-address-port-too-big", lambda f: {"tls": tls_table(f, listen=f"{LOOPBACK}:70000")}, "tls.listen",
     ()),
    ("listen-negative", lambda f: {"tls": tls_table(f, listen=-1)}, "tls.listen", ()),
    ("listen-word", lambda f: {"tls": tls_table(f, listen="https")}, "tls.listen", ()),
    ("listen-boolean", lambda f: {"tls": tls_table(f, listen=True)}, "tls.listen", ()),
    ("hsts-negative", lambda f: {"tls": tls_table(f, hsts=-1)}, "tls.hsts", ()),
    ("hsts-word", lambda f: {"tls": tls_table(f, hsts="a year")}, "tls.hsts", ()),
    ("hsts-boolean", lambda f: {"tls": tls_table(f, hsts=True)}, "tls.hsts", ()),
    ("redirect-string", lambda f: {"tls": tls_table(f, redirect_http="yes")}, "tls.redirect_http", ()),
    ("redirect-number", lambda f: {"tls": tls_table(f, redirect_http=1)}, "tls.redirect_http", ()),
    ("unknown-field", lambda f: {"tls": tls_table(f, lisen=TLS_PORT)}, None, ("tls", "lisen")),
    ("tls-not-a-table", lambda f: {"tls": TLS_PORT}, "tls", ()),
    ("hsts-before-stage-15", lambda f: {"tls": tls_table(f, hsts=HSTS)}, None, ("tls", "hsts")),
    ("redirect-before-stage-15", lambda f: {"tls": tls_table(f, redirect_http=True)}, None,
     ("tls", "redirect_http")),
    ("acme-missing", lambda f: {"acme_webroot": f.missing}, "acme_webroot", ()),
    ("acme-a-file", lambda f: {"acme_webroot": f.file}, "acme_webroot", ()),
    ("acme-number", lambda f: {"acme_webroot": 5}, "acme_webroot", ()),
    ("acme-relative", lambda f: {"acme_webroot": "webroot"}, "acme_webroot", ()),
    ("listen-same-as-status", lambda f: {"tls": tls_table(f), "status_listen": f"{LOOPBACK}:{TLS_PORT}"},
     "tls.listen", ()),
]


def stages_of(name):
    """The stage marks of a TLS_ERRORS or GOOD_TLS entry: hsts, redirect_http
    and acme_webroot come with stage 15; before it, they are unknown fields."""
    if name.endswith("-before-stage-15"):
        return [pytest.mark.stage(14, 14)]
    return [pytest.mark.stage(15)] if name.startswith(("hsts", "redirect", "acme")) else []


def write_config(rsp, tmp_path, options):
    (path,) = proxy_arguments(rsp.stage, LISTEN_PORT, [B], str(tmp_path), options)
    return path


@pytest.mark.parametrize("make, setting, words",
                         [pytest.param(*e[1:], id=e[0], marks=stages_of(e[0])) for e in TLS_ERRORS])
def test_bad_tls_setting(rsp, tmp_path, files, make, setting, words):
    """A bad tls or acme_webroot setting: rsp -t exits 1 with one line on
    stderr naming the file and the setting in quotes (an unknown field:
    the table and the field); a start gives the very same line. (An
    encrypted key is refused, never prompted for: stdin is /dev/null and
    rsp must not hang.)"""
    path = write_config(rsp, tmp_path, make(files))
    line = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, setting, words=words, status=1)
    started = run_rsp(rsp, [path], tmp_path)
    assert started.returncode == 1, f"exit status {started.returncode}, stderr: {started.stderr!r}"
    assert started.stderr.splitlines() == [line], f"rsp -t said {line!r}, a start said {started.stderr!r}"


def test_number_is_not_a_certificate_path(rsp, tmp_path, ca):
    """cert = 5 (a number, not a path) is refused naming
    'tls.certificates[1].cert', even when a file named "5" holding a good
    certificate sits in the directory rsp runs in (a number must not be
    taken for a relative file name)."""
    good = ca.issue(tmp_path, "5", [WWW])
    os.rename(good.cert, tmp_path / "5")
    options = {"tls": {"listen": TLS_PORT, "certificates": [{"cert": 5, "key": good.key}]}}
    path = write_config(rsp, tmp_path, options)
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, "tls.certificates[1].cert", status=1)


def test_key_not_matching_the_certificate(rsp, tmp_path, files):
    """A key that is not the certificate's: one line naming
    'tls.certificates[1]' (or its .key) and saying they do not match."""
    options = {"tls": tls_table(files, certificates=[{"cert": files.good.cert, "key": files.second.key}])}
    path = write_config(rsp, tmp_path, options)
    line = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, None, status=1)
    assert "'tls.certificates[1]'" in line or "'tls.certificates[1].key'" in line, line
    assert "match" in line, line


def test_cert_and_key_swapped(rsp, tmp_path, files):
    """cert and key given the other way round: an error about
    tls.certificates[1] (whichever part it names)."""
    options = {"tls": tls_table(files, certificates=[{"cert": files.good.key, "key": files.good.cert}])}
    path = write_config(rsp, tmp_path, options)
    line = assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, None, status=1)
    assert "'tls.certificates[1]" in line, line


GOOD_TLS = [
    ("port-number", lambda f: {"tls": tls_table(f)}),
    ("address", lambda f: {"tls": tls_table(f, listen=f"{LOOPBACK}:{TLS_PORT}")}),
    ("two-certificates", lambda f: {"tls": tls_table(f, certificates=[f.good.entry(), f.second.entry()])}),
    ("redirect-and-hsts", lambda f: {"tls": tls_table(f, redirect_http=True, hsts=HSTS)}),
    ("redirect-false-hsts-0", lambda f: {"tls": tls_table(f, redirect_http=False, hsts=0)}),
    ("acme-webroot", lambda f: {"tls": tls_table(f), "acme_webroot": f.dir}),
    ("acme-webroot-alone", lambda f: {"acme_webroot": f.dir}),
]


@pytest.mark.parametrize("make", [pytest.param(g[1], id=g[0], marks=stages_of(g[0])) for g in GOOD_TLS])
def test_good_tls_setting(rsp, tmp_path, files, make):
    """Each form the spec allows passes rsp -t ("rsp: PATH: ok"), silently."""
    path = write_config(rsp, tmp_path, make(files))
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout
    assert result.stderr == "", result.stderr


def test_expired_certificate_is_a_warning(rsp, tmp_path, files, backend, start_proxy, ca):
    """A certificate past its notAfter: rsp -t says ok (exit 0) with a
    warning on stderr naming the setting and saying "expired"; rsp
    starts (warning again) and serves it (to a client that does not
    check dates), while a client that does check refuses it."""
    options = {"tls": tls_table(files, certificates=[files.expired.entry()])}
    path = write_config(rsp, tmp_path, options)
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
    assert result.stdout == f"rsp: {path}: ok\n", result.stdout
    assert "expired" in result.stderr and "tls.certificates[1]" in result.stderr, result.stderr
    proxy = start_tls(start_proxy, backend, certificates=[files.expired])
    assert "expired" in proxy.stderr(), proxy.stderr()
    r = https_get(proxy.tls_port, "/bytes?n=10", ca.client_context(verify=False), "old.example.test")
    assert r.status == 200 and r.peer_fingerprint == files.expired.fingerprint
    with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
        handshake_only(proxy.tls_port, ca.client_context(), "old.example.test")


def test_status_counts_handshakes(backend, start_proxy, certs, ctx):
    """The status listener counts TLS handshakes by result: after five
    that complete (one of them resumed) and three clients sending
    garbage, status.json says tls_handshakes {"ok": 5, "failed": 3} and
    /metrics rsp_tls_handshakes_total the same."""
    status_port = free_port()
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], status_listen=status_port)
    wait_until_listening(status_port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = status_port
    first = https_get(proxy.tls_port, "/bytes?n=10", ctx, WWW)
    for _ in range(3):
        assert_tls_serves(proxy, ctx, 10)
    assert https_get(proxy.tls_port, "/bytes?n=10", ctx, WWW, session=first.session).session_reused
    for data in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", random_junk(3, 500), b"\x00" * 64):
        Ending(proxy.tls_port, data).result()
    wait_for(lambda: status_json(proxy).get("tls_handshakes") == {"ok": 5, "failed": 3},
             f"tls_handshakes ok 5, failed 3 (status.json says {status_json(proxy).get('tls_handshakes')})",
             POLL_TIMEOUT)
    families = metrics(proxy)
    assert metric_value(families, "rsp_tls_handshakes_total", result="ok") == 5
    assert metric_value(families, "rsp_tls_handshakes_total", result="failed") == 3


def test_status_counts_handshakes_abandoned_midway(backend, start_proxy, certs, ctx):
    """A client that sends half a ClientHello and then hangs up (a FIN, or
    a reset) failed a handshake, and is counted and logged as one; a
    client that connects and goes without a byte (a port scan, a load
    balancer's TCP check) never began one and is not counted."""
    status_port = free_port()
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], status_listen=status_port)
    wait_until_listening(status_port, proxy.process, POLL_TIMEOUT, what="rsp's status listener")
    proxy.status_port = status_port
    hello, _ = client_hello()
    for _ in range(2):  # silent: connect, close
        connect(proxy.tls_port, timeout=LONG).close()
    for reset in (False, True):  # half a ClientHello, then a FIN or a reset
        sock = connect(proxy.tls_port, timeout=LONG)
        sock.sendall(hello[:len(hello) // 2])
        if reset:
            close_with_reset(sock)
        else:
            sock.close()
    assert_tls_serves(proxy, ctx, 10)  # and the count has seen everything before it
    wait_for(lambda: status_json(proxy).get("tls_handshakes") == {"ok": 1, "failed": 2},
             f"tls_handshakes ok 1, failed 2 (status.json says {status_json(proxy).get('tls_handshakes')})",
             POLL_TIMEOUT)
    wait_for_log(proxy, "TLS handshake failed", POLL_TIMEOUT)


# -- load and workers ---------------------------------------------------------------------------

def test_ab_5000_https_requests(backend, start_proxy, certs):
    """ab -n 5000 -c 20 over HTTPS: every request complete, none failed,
    no non-2xx; afterwards rsp is back to the fds it had at the start."""
    ab = shutil.which("ab")
    if ab is None:
        pytest.skip("ab is not installed (apache2-utils; ./setup-env.sh installs it)")
    proxy = start_tls(start_proxy, backend, certificates=[certs.www])
    fds = count_fds(proxy.pid)
    result = subprocess.run([ab, "-q", "-n", "5000", "-c", "20", "-s", "30",
                             f"https://{LOOPBACK}:{proxy.tls_port}/bytes?n=1000"],
                            capture_output=True, text=True, timeout=110)
    out = result.stdout
    assert result.returncode == 0, f"ab failed ({result.returncode}): {result.stderr}\n{out}"
    assert re.search(r"^Complete requests:\s+5000$", out, re.M), out
    assert re.search(r"^Failed requests:\s+0$", out, re.M), out
    assert "Non-2xx responses" not in out, out
    assert re.search(r"^SSL/TLS Protocol:\s+TLSv1\.[23],", out, re.M), out
    assert backend.hits["/bytes"] == 5000
    wait_idle(proxy, timeout=10)
    assert count_fds(proxy.pid) <= fds


@pytest.mark.parametrize("reuseport", [False, True], ids=["shared", "reuseport"])
def test_tls_with_two_workers(make_backend, start_proxy, certs, ctx, reuseport):
    """workers = 2 (one TLS listening socket shared, or with reuseport
    one per worker): both workers serve TLS (without reuseport a
    connection is put on each by stopping the other; with it, 20
    connections held open land on both), and twenty new connections all
    succeed."""
    backend = make_backend("a")
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], workers=2, reuseport=reuseport)
    pids = started_workers(proxy, 2)
    if reuseport:
        conns = [TLSConn(proxy.tls_port, ctx, WWW, timeout=POLL_TIMEOUT) for _ in range(20)]
        try:
            placed = set()
            for c in conns:
                r = c.get("/bytes?n=100")
                assert r.status == 200
                assert_is_pattern(r.body, 100)
                placed.update(owners(c.sock, proxy.tls_port, pids))
        finally:
            for c in conns:
                c.close()
        assert placed == set(pids), f"20 TLS connections went to workers {placed} of {pids}"
    else:
        for pid in pids:
            with tls_conn_on_worker(proxy, ctx, pid, pids) as c:
                r = c.get("/bytes?n=100")
                assert r.status == 200
                assert_is_pattern(r.body, 100)
    for i in range(20):
        assert_tls_serves(proxy, ctx, 100 + i)
    assert_serves(proxy)


def tls_conn_on_worker(proxy, ctx, pid, pids, session=None, server_name=WWW):
    """A TLSConn (SNI and Host `server_name`) accepted by worker `pid`
    (the others stopped while it connects and handshakes)."""
    others = [p for p in pids if p != pid]
    try:
        for p in others:
            os.kill(p, signal.SIGSTOP)
        for p in others:
            wait_state(p, "Tt", "stopped")
        conn = TLSConn(proxy.tls_port, ctx, server_name, session=session, timeout=POLL_TIMEOUT)
    finally:
        for p in others:
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
    held_by = owners(conn.sock, proxy.tls_port, pids)
    if held_by != [pid]:
        conn.close()
        pytest.fail(f"with {others} stopped, the TLS connection was accepted by {held_by}, not {pid}")
    return conn


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["1.2", "1.3"])
def test_session_resumes_on_the_other_worker(make_backend, start_proxy, certs, ca, version):
    """workers = 2: a session ticket one worker issued resumes on the
    other (the workers share the ticket keys), else a client would get a
    full handshake on every other connection."""
    backend = make_backend("a")
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], workers=2)
    pids = started_workers(proxy, 2)
    c = ca.client_context(minimum=version, maximum=version)
    with tls_conn_on_worker(proxy, c, pids[0], pids) as first:
        assert first.get("/bytes?n=10").status == 200
        session = first.session
    with tls_conn_on_worker(proxy, c, pids[0], pids, session=session) as same:
        assert same.session_reused, "not even resumed on the worker that issued the ticket"
    with tls_conn_on_worker(proxy, c, pids[1], pids, session=session) as other:
        assert other.get("/bytes?n=10").status == 200
        assert other.session_reused, "a ticket from worker 1 was not accepted by worker 2"
