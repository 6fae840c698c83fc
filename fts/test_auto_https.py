"""rsp's own ACME client (stage 19): `tls.acme` gets certificates from a
real ACME server, pebble, with nothing in between: no certbot, no webroot,
no reload.

pebble validates for real (no PEBBLE_VA_ALWAYS_VALID): its mock DNS
(pebble-challtestsrv) resolves every name to 127.0.0.1 and its httpPort
and tlsPort are rsp's plain and TLS ports, so each http-01 validation is
a GET of http://NAME:PLAIN/.well-known/acme-challenge/TOKEN that rsp's
plain listener must answer, and each tls-alpn-01 one a handshake with ALPN
acme-tls/1 on rsp's TLS listener. Every test has a pebble of its own (a
new root each time, fetched from its management port /roots/0) and a
storage directory of its own; every port comes from netutil's allocator,
so the tests run side by side (-n 2).

A certificate is judged the way a browser would: HTTPS to rsp's TLS
listener with SNI NAME, trusting pebble's root and nothing else, host
name checked (so rsp must send the intermediate too), the leaf the one in
STORAGE/certificates/SET.crt, the request reaching the site's backend.
Orders are counted in pebble's log (one "Added order" line per newOrder
it accepted). status.json's "certificates" and /metrics'
rsp_certificate_expiry_seconds must say what is served.

Some moments must be caught mid-order: the plain listener still answering
while the first certificate is being obtained, the old certificate still
served while the renewal is on. A test cannot outrun an order made in
about a second, so those tests put a Gate between pebble and rsp's plain
listener: pebble's http-01 validation requests are held there (pebble
waits up to 15 s for them) until the test has looked, then let through.
The order cannot complete before that, so what the test sees while the
gate is closed is the "during" state, whatever the machine's speed.

pebble has no renewalInfo (RFC 9773 ARI) in its directory, so the ARI
tests put an AriRelay between rsp and pebble: an HTTPS server of the
test's that passes every request on to pebble and every answer back (its
headers too: Replay-Nonce, Location, Link, Retry-After), adds renewalInfo
to the directory and answers /renewal-info/CERTID itself, with the window
the test chose; it records the certIDs asked for and each newOrder's
payload.

Every wait is bounded (a log line, a status.json state, a certificate
served), never a sleep. The config-error tests need no pebble; the others
are skipped without pebble and pebble-challtestsrv (./setup-env.sh
installs them); the whole file without python3-trustme.
"""

import base64
import calendar
import datetime
import http.client
import http.server
import json
import os
import re
import signal
import socket
import ssl
import stat
import threading
import time
import urllib.parse

import pytest

trustme = pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")

from cryptography import x509  # noqa: E402 (after the skip: trustme brings cryptography)
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from checks import assert_config_error, log_lines, nobody, proc_uid, served_by  # noqa: E402
from client import get  # noqa: E402
from conftest import _stopped_at_teardown  # noqa: E402
from netutil import LOOPBACK, free_port, wait_until_listening  # noqa: E402
from pebble import (challenge_lines, daemons, missing_tools,  # noqa: E402,F401 (fixtures)
                    start_pebble)
from promparse import parse as parse_metrics, value as metric_value  # noqa: E402
from proxy import proxy_arguments, run_rsp  # noqa: E402
from test_tls import tls_conn_on_worker  # noqa: E402
from test_workers import started_workers  # noqa: E402
from tlsutil import VALID_FROM, cert_names, fingerprint, https_get, session_ca, tls_connect  # noqa: E402

MISSING = missing_tools()
needs_pebble = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed "
                                                         f"(./setup-env.sh installs pebble)")

pytestmark = pytest.mark.stage(19)

A, B, WWW_B = "a.test", "b.test", "www.b.test"
OTHER = "other.test"      # served from tls.certificates, never ordered
BAD = "bad.test"          # the mock DNS sends pebble to UNREACHABLE for it
UNREACHABLE = "127.0.0.9"  # loopback, but nothing of rsp's listens there
ISSUE_TIMEOUT = 30.0      # s: a bound on an order (about a second here)
NONCE_TIMEOUT = 60.0      # s: the same with half of the nonces refused
POLL_TIMEOUT = 10.0       # s: a bound on a listener, a worker, the gate
GATE_LIMIT = 60.0         # s: a connection the test never lets through is dropped then
BACKOFF = 60              # s: the first retry of a failed name
STATES = ("valid", "obtaining", "renewing", "failed")


# -- the gate -------------------------------------------------------------------------------

class Gate:
    """A TCP relay from 127.0.0.1:port to 127.0.0.1:target that holds every
    connection it accepts, unanswered, until open() (then relays each
    both ways, and every later one at once). `arrived` counts the
    connections accepted."""

    def __init__(self, target):
        self.target = target
        self.arrived = 0
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._stopping = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((LOOPBACK, free_port()))
        self.listener.listen(16)
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while not self._stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.arrived += 1
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn):
        with conn:
            if not self._released.wait(GATE_LIMIT) or self._stopping.is_set():
                return
            conn.settimeout(None)
            try:
                upstream = socket.create_connection((LOOPBACK, self.target), timeout=POLL_TIMEOUT)
            except OSError:
                return
            with upstream:
                back = threading.Thread(target=_copy, args=(upstream, conn), daemon=True)
                back.start()
                _copy(conn, upstream)
                back.join(GATE_LIMIT)

    def open(self):
        self._released.set()

    def stop(self):
        self._stopping.set()
        self._released.set()
        self._thread.join(POLL_TIMEOUT)
        self.listener.close()


def _copy(source, sink):
    """Copies bytes from socket `source` to `sink` until EOF, then ends
    sink's writing side."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture
def gates():
    """gates(target) starts a Gate in front of port `target`; each is
    stopped at teardown."""
    yield from _stopped_at_teardown(Gate)


# -- the ARI relay ---------------------------------------------------------------------------

RENEWAL_INFO = "/renewal-info/"
RELAYED_HEADERS = ("Content-Type", "Replay-Nonce", "Location", "Link", "Retry-After", "Cache-Control")


class AriRelay:
    """An HTTPS server on 127.0.0.1 (its certificate from a CA of its own,
    in the file `ca_file`) in front of `pebble`: every request is passed on
    to pebble as it came (method, path, headers, Host included, so the URL
    rsp signed is the one pebble sees), and pebble's answer is passed back
    with its status, its RELAYED_HEADERS and its body, pebble's address in
    them replaced by the relay's. The directory (`directory`, the relay's
    /dir) gains "renewalInfo": https://RELAY/renewal-info; GET
    /renewal-info/CERTID is answered here: 200, `renewal_info` (bytes, set
    by the test), each CERTID appended to `cert_ids`. The payload of every
    newOrder passed on (decoded from its JWS) is appended to `orders`."""

    def __init__(self, pebble):
        self.pebble = pebble
        self.renewal_info = b""
        self.cert_ids, self.orders = [], []
        self._lock = threading.Lock()
        ca = trustme.CA()
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert(LOOPBACK).configure_cert(self._context)
        self._pebble_context = ssl.create_default_context(cafile=pebble.api_ca)
        pebble_url = urllib.parse.urlsplit(pebble.directory)
        self._pebble_port = pebble_url.port
        self._pebble_base = f"https://{pebble_url.netloc}".encode()
        self._new_order = urllib.parse.urlsplit(json.loads(pebble.fetch(pebble.directory))["newOrder"]).path
        self.server = http.server.ThreadingHTTPServer((LOOPBACK, free_port()), _RelayHandler)
        self.server.daemon_threads = True
        self.server.relay = self
        self.server.finish_request = self._finish_request
        self.base = f"https://{LOOPBACK}:{self.server.server_address[1]}".encode()
        self.directory = f"{self.base.decode()}{pebble_url.path}"
        self.ca_file = os.path.join(os.path.dirname(pebble.api_ca), "relay-ca.pem")
        ca.cert_pem.write_to_path(self.ca_file)
        os.chmod(self.ca_file, 0o644)
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()

    def acme_fields(self):
        """What tls.acme needs to go through the relay: its directory, its CA."""
        return {"directory": self.directory, "ca_root": self.ca_file}

    def _finish_request(self, sock, address):
        # The TLS handshake in the connection's own thread, bounded.
        sock.settimeout(POLL_TIMEOUT)
        try:
            conn = self._context.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError):
            return
        with conn:
            _RelayHandler(conn, address, self.server)

    def answer(self, handler, method):
        """Answers one request: the renewal information, or pebble's answer."""
        if method == "GET" and handler.path.startswith(RENEWAL_INFO):
            with self._lock:
                self.cert_ids.append(handler.path[len(RENEWAL_INFO):])
            handler.reply(200, [("Content-Type", "application/json")], self.renewal_info, method)
            return
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        if method == "POST" and handler.path == self._new_order:
            payload = json.loads(base64url_decode(json.loads(body)["payload"]))
            with self._lock:
                self.orders.append(payload)
        upstream = http.client.HTTPSConnection(LOOPBACK, self._pebble_port, context=self._pebble_context,
                                               timeout=POLL_TIMEOUT)
        try:
            upstream.putrequest(method, handler.path, skip_host=True, skip_accept_encoding=True)
            for name, value in handler.headers.items():
                if name.lower() not in ("connection", "content-length"):
                    upstream.putheader(name, value)
            if body or method == "POST":
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body or None)
            answer = upstream.getresponse()
            data = answer.read().replace(self._pebble_base, self.base)
            headers = [(name, value.replace(self._pebble_base.decode(), self.base.decode()))
                       for name, value in answer.getheaders() if name in RELAYED_HEADERS]
            status = answer.status
        finally:
            upstream.close()
        if method == "GET" and handler.path == urllib.parse.urlsplit(self.directory).path and status == 200:
            directory = json.loads(data)
            directory["renewalInfo"] = f"{self.base.decode()}{RENEWAL_INFO.rstrip('/')}"
            data = json.dumps(directory).encode()
        handler.reply(status, headers, data, method)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(POLL_TIMEOUT)


class _RelayHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.server.relay.answer(self, "GET")

    def do_HEAD(self):
        self.server.relay.answer(self, "HEAD")

    def do_POST(self):
        self.server.relay.answer(self, "POST")

    def reply(self, status, headers, body, method):
        """Status, headers, Content-Length, Connection: close, and body (none for HEAD)."""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

    def log_message(self, format, *args):
        pass


@pytest.fixture
def ari_relays():
    """ari_relays(pebble) starts an AriRelay in front of pebble; each is
    stopped at teardown."""
    yield from _stopped_at_teardown(AriRelay)


def base64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def base64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def ari_cert_id(cert):
    """RFC 9773 4.1's certID of x509 `cert`: base64url of its AKI
    keyIdentifier, ".", base64url of its serial's DER content octets (big
    endian, two's complement: a 0 byte first when the top bit is set)."""
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
    assert aki, f"{describe_cert(cert)} has no AKI keyIdentifier: it has no certID"
    serial = cert.serial_number
    return f"{base64url(aki)}.{base64url(serial.to_bytes(serial.bit_length() // 8 + 1, 'big'))}"


def renewal_window(start, end):
    """A renewalInfo answer suggesting the window from `start` to `end`
    (seconds from now), RFC 3339 in UTC."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return json.dumps({"suggestedWindow": {
        "start": (now + datetime.timedelta(seconds=start)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "end": (now + datetime.timedelta(seconds=end)).strftime("%Y-%m-%dT%H:%M:%SZ")}}).encode()


# -- one test's ACME world --------------------------------------------------------------------

class Acme:
    """pebble validating on the plain and TLS ports chosen here (http-01
    through a Gate when gated), its root in a file, a storage directory,
    and start() to run rsp with tls.acme pointed at all that. The files
    rsp reads (config, pebble's API CA) are in `workdir`."""

    def __init__(self, rsp, workdir, start_proxy, start_pebble, gates, backend, gated=False, pebble_env=None):
        self.rsp = rsp
        self.workdir = str(workdir)
        self._start_proxy = start_proxy
        self.backend = backend
        self.plain_port, self.tls_port = free_port(), free_port()
        self.gate = gates(self.plain_port) if gated else None
        self.pebble = start_pebble(self.gate.port if gated else self.plain_port, self.tls_port, env=pebble_env)
        self.root = os.path.join(self.workdir, "pebble-root.pem")
        with open(self.root, "w") as f:
            f.write(self.pebble.root_pem())
        self.ca_root = os.path.join(self.workdir, "pebble-api-ca.pem")
        with open(self.pebble.api_ca, "rb") as f, open(self.ca_root, "wb") as out:
            out.write(f.read())
        for path in (self.root, self.ca_root):
            os.chmod(path, 0o644)
        self.storage = os.path.join(self.workdir, "acme")

    def acme_table(self, **fields):
        """tls.acme: agreed, pebble's directory and API CA, the storage, and `fields`."""
        return {"agree_to_terms": True, "directory": self.pebble.directory, "ca_root": self.ca_root,
                "storage": self.storage, **fields}

    def start(self, sites=None, acme=None, certificates=None, plain_port=None, tls_port=None, **options):
        """rsp serving `sites` (default: A on the backend) on the plain port
        and the TLS port (those pebble validates on, unless given), with
        tls.acme (acme_table() plus `acme`), tls.certificates when given,
        a status listener (proxy.status_port) and an access log
        (proxy.access_log); `options` go to start_proxy. Waits for the TLS
        and status listeners."""
        plain_port = self.plain_port if plain_port is None else plain_port
        tls_port = self.tls_port if tls_port is None else tls_port
        status_port = free_port()
        tls = {"listen": f"{LOOPBACK}:{tls_port}", "acme": self.acme_table(**(acme or {}))}
        if certificates is not None:
            tls["certificates"] = [c.entry() for c in certificates]
        access_log = os.path.join(self.workdir, f"access-{plain_port}.log")
        settings = {"sites": sites if sites is not None else {A: [self.backend]}, "tls": tls,
                    "status_listen": f"{LOOPBACK}:{status_port}", "access_log": access_log, **options}
        args = proxy_arguments(self.rsp.stage, plain_port, [], self.workdir, settings)
        os.chmod(args[0], 0o644)  # a user = "nobody" rsp reads it again on a reload
        proxy = self._start_proxy(args=args, port=plain_port)
        proxy.tls_port, proxy.status_port, proxy.access_log = tls_port, status_port, access_log
        for port, what in ((tls_port, "TLS"), (status_port, "status")):
            try:
                wait_until_listening(port, proxy.process, POLL_TIMEOUT, what=f"rsp's {what} listener")
            except RuntimeError as e:
                pytest.fail(f"{e}\n{self.describe(proxy)}", pytrace=False)
        return proxy

    # -- what a failure message shows

    def describe(self, proxy):
        """rsp's output, its status.json's certificates, the end of pebble's log."""
        try:
            certificates = json.dumps(status(proxy).get("certificates"), indent=1)
        except Exception as e:  # rsp gone, or no status: the message says so
            certificates = f"(not available: {e!r})"
        return (f"{proxy.describe()}\n--- status.json's certificates ---\n{certificates}\n"
                f"--- pebble's log (end) ---\n{self.pebble.log()[-5000:]}")

    def wait(self, proxy, condition, what, timeout=ISSUE_TIMEOUT):
        """Polls condition() (bounded) until it is true; fails with the
        whole picture if rsp exits or the time is up."""
        deadline = time.monotonic() + timeout
        while not condition():
            if not proxy.alive():
                pytest.fail(f"rsp exited while waiting for {what}\n{self.describe(proxy)}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not the case after {timeout} s\n{self.describe(proxy)}", pytrace=False)
            time.sleep(0.05)

    def wait_log(self, proxy, text, timeout=ISSUE_TIMEOUT):
        """Waits for a line of rsp's log containing `text`; returns the lines."""
        self.wait(proxy, lambda: log_lines(proxy, text), f"a line {text!r} in rsp's log", timeout)
        return log_lines(proxy, text)

    def wait_obtained(self, proxy, name, timeout=ISSUE_TIMEOUT):
        """Waits for `acme: NAME: certificate obtained (...)`; returns the line."""
        return self.wait_log(proxy, f"acme: {name}: certificate obtained (", timeout)[0]

    def wait_state(self, proxy, name, state, timeout=ISSUE_TIMEOUT):
        """Waits until status.json shows the set named `name` in `state`; returns its entry."""
        self.wait(proxy, lambda: (cert_entry(proxy, name) or {}).get("state") == state,
                  f"status.json's certificate {name} in state {state!r}", timeout)
        return cert_entry(proxy, name)

    # -- storage

    def path(self, *parts):
        return os.path.join(self.storage, *parts)

    def stored_leaf(self, name):
        """The leaf of STORAGE/certificates/NAME.crt (x509)."""
        return pem_certificates(self.path("certificates", f"{name}.crt"))[0]

    # -- HTTPS

    def context(self):
        """A client context trusting pebble's root and nothing else, host names checked."""
        return ssl.create_default_context(cafile=self.root)

    def https(self, proxy, name, path="/echo", port=None):
        """GET `path` over TLS (SNI and Host `name`) verified against pebble's
        root; fails, saying what rsp presented instead, if it does not verify."""
        port = proxy.tls_port if port is None else port
        try:
            return https_get(port, path, self.context(), name)
        except ssl.SSLError as e:
            pytest.fail(f"rsp's certificate for {name} does not verify against pebble's root: {e}\n"
                        f"rsp presents: {describe_cert(presented(port, name))}\n{self.describe(proxy)}",
                        pytrace=False)

    def assert_serves(self, proxy, name, set_name=None, port=None):
        """HTTPS for `name` verifies against pebble's root alone, with `name`
        in the leaf's subjectAltName; the leaf is the one stored for the set
        `set_name` (default: `name`); the request reaches the backend.
        Returns the leaf (x509)."""
        set_name = name if set_name is None else set_name
        hits = self.backend.hits["/echo"]
        r = self.https(proxy, name, port=port)
        assert name in cert_names(r.peer_cert), f"the certificate for {name} names {cert_names(r.peer_cert)}"
        stored = self.stored_leaf(set_name)
        assert r.peer_fingerprint == fingerprint(stored.public_bytes(serialization.Encoding.DER)), (
            f"rsp serves {describe_cert(r.peer_cert)} for {name}, not the stored certificate "
            f"{describe_cert(stored)}\n{self.describe(proxy)}")
        assert served_by(r) == self.backend.name, f"{r!r} {r.raw[:300]!r}"
        assert r.json()["path"] == "/echo"
        assert self.backend.hits["/echo"] == hits + 1
        return r.peer_cert


@pytest.fixture
def acme_world(rsp, tmp_path, start_pebble, gates, make_backend, start_proxy):
    """acme_world(gated=False, pebble_env=None, workdir=tmp_path): an Acme
    with a backend "a" (acme.backend). At teardown rsp is stopped (and
    checked) first, then the backend, the gate and pebble."""
    def make(gated=False, pebble_env=None, workdir=None):
        return Acme(rsp, workdir or tmp_path, start_proxy, start_pebble, gates, make_backend("a"),
                    gated=gated, pebble_env=pebble_env)
    return make


# -- status.json and /metrics ------------------------------------------------------------

def status(proxy):
    """status.json, parsed."""
    r = get(proxy.status_port, "/status.json")
    assert r.status == 200, f"status.json: {r!r} {r.raw[:300]!r}"
    return json.loads(r.body)


def cert_entries(proxy):
    """status.json's "certificates" array, each entry's shape checked."""
    doc = status(proxy)
    assert isinstance(doc.get("certificates"), list), \
        f"status.json has no \"certificates\" array: {json.dumps(doc)[:2000]}"
    for entry in doc["certificates"]:
        check_entry(entry)
    return doc["certificates"]


def check_entry(entry):
    """One certificate set in status.json: names (strings), state, not_after
    and next_attempt (UNIX seconds or null), last_error (a string or null)."""
    fields = ("names", "state", "not_after", "last_error", "next_attempt")
    missing = [f for f in fields if f not in entry]
    assert not missing, f"status.json's certificate entry lacks {missing}: {entry}"
    assert isinstance(entry["names"], list) and entry["names"], entry
    assert all(isinstance(n, str) for n in entry["names"]), entry
    assert entry["state"] in STATES, f"state {entry['state']!r} is none of {STATES}: {entry}"
    for field in ("not_after", "next_attempt"):
        assert entry[field] is None or is_seconds(entry[field]), f"{field} is not UNIX seconds or null: {entry}"
    assert entry["last_error"] is None or isinstance(entry["last_error"], str), entry


def is_seconds(x):
    return type(x) in (int, float) and x > 1_000_000_000


def cert_entry(proxy, name):
    """The entry of the set named `name` (its first name), or None."""
    found = [e for e in cert_entries(proxy) if e["names"][0] == name]
    assert len(found) <= 1, f"status.json has {len(found)} certificate entries named {name}: {found}"
    return found[0] if found else None


def expiry_metric(proxy, names):
    """/metrics' rsp_certificate_expiry_seconds{names="NAMES"}."""
    r = get(proxy.status_port, "/metrics")
    assert r.status == 200, f"/metrics: {r!r} {r.raw[:300]!r}"
    return metric_value(parse_metrics(r.body.decode()), "rsp_certificate_expiry_seconds", names=names)


# -- certificates -------------------------------------------------------------------------

def pem_certificates(path):
    """Every certificate in PEM file `path` (x509), in order."""
    with open(path, "rb") as f:
        text = f.read()
    blocks = re.findall(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", text, re.S)
    assert blocks, f"{path} holds no certificate"
    return [x509.load_pem_x509_certificate(block) for block in blocks]


def not_after(cert):
    """A certificate's notAfter in UNIX seconds."""
    return calendar.timegm(cert.not_valid_after.utctimetuple())


def describe_cert(cert):
    if cert is None:
        return "no certificate"
    return (f"[subject {cert.subject.rfc4514_string()}, issuer {cert.issuer.rfc4514_string()}, "
            f"names {cert_names(cert)}, not after {cert.not_valid_after}]")


def presented(port, name):
    """The leaf rsp presents for SNI `name` (x509), unverified; None if
    the handshake fails."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with tls_connect(port, context, name, timeout=POLL_TIMEOUT) as sock:
            return x509.load_der_x509_certificate(sock.getpeercert(binary_form=True))
    except (OSError, ssl.SSLError):
        return None


def issued_by_pebble(acme, port, name):
    """True if rsp presents, for SNI `name`, a certificate that verifies
    against pebble's root for that name."""
    try:
        with tls_connect(port, acme.context(), name, timeout=POLL_TIMEOUT):
            return True
    except OSError:  # ssl.SSLError too: not verified, or no certificate at all
        return False


def plant(acme, name, left):
    """Writes a certificate for `name` (from a throwaway CA, ECDSA P-256,
    valid from a day ago to `left` from now) into storage as
    certificates/NAME.crt and NAME.key (0600, directories 0700): what an
    earlier run would have left there. Returns it (tlsutil.IssuedCert)."""
    certificates = acme.path("certificates")
    os.makedirs(certificates, mode=0o700)
    os.chmod(acme.storage, 0o700)
    made = os.path.join(acme.workdir, "planted")
    os.mkdir(made)
    cert = session_ca().issue(made, name, [name], key_type="ec",
                              not_after=datetime.datetime.utcnow().replace(microsecond=0) + left)
    for source, target in ((cert.cert, f"{name}.crt"), (cert.key, f"{name}.key")):
        with open(source, "rb") as f:
            data = f.read()
        fd = os.open(os.path.join(certificates, target), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return cert


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def stop(proxy):
    """SIGTERM, and rsp exits with status 0."""
    proxy.process.send_signal(signal.SIGTERM)
    code = proxy.wait_exit(POLL_TIMEOUT)
    assert code == 0, f"rsp exited with {code} on SIGTERM\n{proxy.describe()}"


# -- the first certificate ----------------------------------------------------------------

@needs_pebble
def test_first_certificate_by_http01_while_serving(acme_world, tmp_path):
    """rsp starts with no certificate for a.test (only tls.certificates'
    other.test, the default one) and orders one in the background. While
    pebble's http-01 validation is held at the gate (the order is under
    way), plain HTTP for a.test reaches the backend, HTTPS for other.test
    is served with its configured certificate, and status.json says
    a.test is "obtaining". Let through, the validation is answered by
    rsp's plain listener (200s in the access log, none reaching the
    backend), rsp logs `acme: a.test: certificate obtained (...)`, and
    HTTPS for a.test verifies against pebble's root alone, for that name,
    picked by SNI, with no restart (same pid). status.json and /metrics
    give its notAfter; pebble accepted one order."""
    acme = acme_world(gated=True)
    other = session_ca().issue(tmp_path, "other", [OTHER], key_type="ec")
    backend = acme.backend
    proxy = acme.start(sites={A: [backend], OTHER: [backend]}, acme={"domains": [A], "email": "me@example.org"},
                       certificates=[other])

    acme.wait(proxy, lambda: acme.gate.arrived >= 1, "pebble's http-01 validation of a.test at the gate")
    assert not log_lines(proxy, "certificate obtained"), acme.describe(proxy)
    entry = cert_entry(proxy, A)
    assert entry is not None and entry["state"] == "obtaining" and entry["not_after"] is None, \
        f"while the order is under way: {entry}\n{acme.describe(proxy)}"
    assert entry["names"] == [A], entry
    plain = get(proxy.port, "/echo", host=A)
    assert served_by(plain) == backend.name and plain.json()["path"] == "/echo", \
        f"plain HTTP for a.test while the certificate is being obtained: {plain!r} {plain.raw[:300]!r}"
    r = https_get(proxy.tls_port, "/echo", session_ca().client_context(), OTHER)
    assert served_by(r) == backend.name and r.peer_fingerprint == other.fingerprint, \
        f"HTTPS for other.test while a.test's certificate is being obtained: {r!r}"

    acme.gate.open()
    line = acme.wait_obtained(proxy, A)
    leaf = acme.assert_serves(proxy, A)
    assert cert_names(leaf) == [A], f"a.test's certificate names {cert_names(leaf)}"
    assert acme.pebble.orders() == 1, f"{line}\n{acme.pebble.log()[-3000:]}"
    assert presented(proxy.tls_port, OTHER) == other.certificate, "other.test's certificate changed"

    tokens = set(acme.pebble.validation_tokens(A))
    assert tokens, "pebble's log names no http-01 validation of a.test"
    # rsp writes its access log in batches: give the lines a bounded moment.
    acme.wait(proxy, lambda: {token for token, _ in challenge_lines(proxy.access_log)} >= tokens,
              f"pebble's validation requests (tokens {tokens}) in rsp's access log", POLL_TIMEOUT)
    logged = challenge_lines(proxy.access_log)
    assert {token for token, _ in logged} == tokens and all(code == "200" for _, code in logged), \
        f"rsp's access log has {logged} for pebble's validation tokens {tokens}"
    forwarded = [path for path in backend.hits if path.startswith("/.well-known/")]
    assert not forwarded, f"challenge requests reached the backend: {forwarded}"

    entry = acme.wait_state(proxy, A, "valid")
    assert entry["not_after"] == not_after(leaf) and entry["last_error"] is None, entry
    assert expiry_metric(proxy, A) == not_after(leaf)
    assert not log_lines(proxy, f"acme: {A}: failed"), acme.describe(proxy)


@needs_pebble
def test_tls_alpn01_only(acme_world):
    """challenges = {"tls-alpn-01"}: the certificate comes through rsp's TLS
    listener (ALPN acme-tls/1, a validation certificate for the name);
    pebble makes no http-01 request at all and the access log has no
    challenge line."""
    acme = acme_world()
    proxy = acme.start(acme={"challenges": ["tls-alpn-01"]})
    acme.wait_obtained(proxy, A)
    acme.assert_serves(proxy, A)
    assert acme.pebble.http_validations() == [], \
        f"challenges = {{\"tls-alpn-01\"}}, yet pebble validated {acme.pebble.http_validations()}"
    assert challenge_lines(proxy.access_log) == []
    assert acme.pebble.validated_names() == [A] and acme.pebble.orders() == 1, acme.pebble.log()[-3000:]


@needs_pebble
def test_two_sites_two_certificates(acme_world):
    """No domains given: every site name is ordered, each in a certificate
    of its own; SNI picks each one's."""
    acme = acme_world()
    proxy = acme.start(sites={A: [acme.backend], B: [acme.backend]})
    acme.wait_obtained(proxy, A)
    acme.wait_obtained(proxy, B)
    a, b = acme.assert_serves(proxy, A), acme.assert_serves(proxy, B)
    assert (cert_names(a), cert_names(b)) == ([A], [B])
    assert acme.pebble.orders() == 2
    assert sorted(e["names"][0] for e in cert_entries(proxy)) == [A, B]
    for name, leaf in ((A, a), (B, b)):
        entry = acme.wait_state(proxy, name, "valid")
        assert entry["names"] == [name] and entry["not_after"] == not_after(leaf), entry
        assert expiry_metric(proxy, name) == not_after(leaf)


@needs_pebble
def test_reload_keeps_serving_two_certificates(acme_world):
    """SIGHUP with two certificates held (the config unchanged): each is
    moved over to the new generation, not ordered again; rsp stays up and
    serves both."""
    acme = acme_world()
    proxy = acme.start(sites={A: [acme.backend], B: [acme.backend]})
    acme.wait_obtained(proxy, A)
    acme.wait_obtained(proxy, B)
    proxy.process.send_signal(signal.SIGHUP)
    acme.wait_log(proxy, "reloaded ")
    assert proxy.alive(), f"rsp died on a reload\n{acme.describe(proxy)}"
    acme.assert_serves(proxy, A)
    acme.assert_serves(proxy, B)
    assert acme.pebble.orders() == 2


@needs_pebble
def test_a_set_of_two_names_in_one_certificate(acme_world):
    """domains = {{"b.test", "www.b.test"}}: one order, one certificate
    for both names (stored as certificates/b.test.*: a set is named by its
    first name), served for either."""
    acme = acme_world()
    proxy = acme.start(sites={B: [acme.backend], WWW_B: [acme.backend]}, acme={"domains": [[B, WWW_B]]})
    acme.wait_obtained(proxy, B)
    first = acme.assert_serves(proxy, B)
    second = acme.assert_serves(proxy, WWW_B, set_name=B)
    assert first == second and sorted(cert_names(first)) == [B, WWW_B], cert_names(first)
    assert acme.pebble.orders() == 1
    assert sorted(os.listdir(acme.path("certificates"))) in ([f"{B}.crt", f"{B}.key"],
                                                              [f"{B}.crt", f"{B}.key", f"{B}.lock"])
    entry = acme.wait_state(proxy, B, "valid")
    assert entry["names"] == [B, WWW_B], entry
    assert len(cert_entries(proxy)) == 1


@needs_pebble
def test_site_aliases_in_its_one_certificate(acme_world):
    """No domains given, a site b.test with the alias www.b.test: one
    order, one certificate holding both names (the site's name first: the
    set is named b.test), served for either name to the site's backend."""
    acme = acme_world()
    proxy = acme.start(sites={B: {"backends": [acme.backend], "aliases": [WWW_B]}})
    acme.wait_obtained(proxy, B)
    first = acme.assert_serves(proxy, B)
    second = acme.assert_serves(proxy, WWW_B, set_name=B)
    assert first == second and sorted(cert_names(first)) == [B, WWW_B], cert_names(first)
    assert acme.pebble.orders() == 1
    entry = acme.wait_state(proxy, B, "valid")
    assert entry["names"] == [B, WWW_B], entry
    assert len(cert_entries(proxy)) == 1, cert_entries(proxy)


# -- restarts and renewal -----------------------------------------------------------------

@needs_pebble
def test_restart_places_no_new_order(acme_world):
    """rsp stopped after its first certificate and started again (on other
    ports, with the same storage) uses the stored certificate at once:
    `using the stored certificate, valid until ...`, no order (pebble
    accepted one in all), the files untouched, the account key kept."""
    acme = acme_world()
    first = acme.start()
    acme.wait_obtained(first, A)
    acme.assert_serves(first, A)
    paths = (acme.path("certificates", f"{A}.crt"), acme.path("certificates", f"{A}.key"), acme.path("account.key"))
    files = {path: snapshot(path) for path in paths}
    stop(first)

    second = acme.start(plain_port=free_port(), tls_port=free_port())
    line = acme.wait_log(second, f"acme: {A}: using the stored certificate, valid until ")[0]
    acme.assert_serves(second, A)
    assert acme.wait_state(second, A, "valid")["not_after"] == not_after(acme.stored_leaf(A))
    assert not log_lines(second, "certificate obtained") and acme.pebble.orders() == 1, \
        f"{line}\n{acme.describe(second)}"
    for path, before in files.items():
        assert snapshot(path) == before, f"{path} was rewritten by the second rsp"


def snapshot(path):
    """(content, inode, mtime) of file `path`."""
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        return f.read(), info.st_ino, info.st_mtime_ns


@needs_pebble
def test_stored_certificate_near_expiry_renewed_while_it_serves(acme_world):
    """A stored certificate for a.test with a twenty-fifth of its life left
    (an hour of 25) is served at once and renewed at start: `acme: a.test:
    renewing (...)`, status.json "renewing" with the old notAfter. While
    the renewal's validation is held at the gate, HTTPS for a.test gets
    the old certificate; once through, the new one (pebble's, verified),
    stored in place of the old one."""
    acme = acme_world(gated=True)
    old = plant(acme, A, left=datetime.timedelta(hours=1))
    proxy = acme.start()
    acme.wait_log(proxy, f"acme: {A}: renewing (")
    acme.wait(proxy, lambda: acme.gate.arrived >= 1, "pebble's validation of the renewal at the gate")
    during = presented(proxy.tls_port, A)
    assert during is not None and during == old.certificate, \
        f"during the renewal rsp presents {describe_cert(during)}, not the stored {describe_cert(old.certificate)}"
    entry = cert_entry(proxy, A)
    assert entry is not None and entry["state"] == "renewing" and entry["not_after"] == not_after(old.certificate), \
        f"during the renewal: {entry}"

    acme.gate.open()
    acme.wait_obtained(proxy, A)
    new = acme.assert_serves(proxy, A)
    assert new != old.certificate and not_after(new) > not_after(old.certificate)
    assert acme.wait_state(proxy, A, "valid")["not_after"] == not_after(new)
    assert acme.pebble.orders() == 1


TWO_THIRDS_LEFT = 2 * VALID_FROM  # plant()'s certificates start VALID_FROM ago: a lifetime of three such
DAY = 86400


def ari_world(acme_world, ari_relays, renewal_info):
    """An Acme whose rsp goes through an AriRelay answering `renewal_info`,
    with a certificate for a.test planted with two thirds of its lifetime
    left (not due by the lifetime rule). Returns (acme, relay, planted
    IssuedCert, its certID)."""
    acme = acme_world()
    relay = ari_relays(acme.pebble)
    relay.renewal_info = renewal_info
    old = plant(acme, A, left=TWO_THIRDS_LEFT)
    return acme, relay, old, ari_cert_id(old.certificate)


def assert_serves_planted(acme, proxy, old):
    """HTTPS for a.test gets the planted certificate and reaches the backend;
    status.json says "valid" with its notAfter; no order was placed."""
    r = https_get(proxy.tls_port, "/echo", session_ca().client_context(), A)
    assert r.peer_fingerprint == old.fingerprint and served_by(r) == acme.backend.name, \
        f"HTTPS for a.test: {describe_cert(r.peer_cert)}, {r!r}\n{acme.describe(proxy)}"
    entry = acme.wait_state(proxy, A, "valid")
    assert entry["not_after"] == not_after(old.certificate) and entry["last_error"] is None, entry


@needs_pebble
def test_ari_window_open_renews_at_start(acme_world, ari_relays):
    """The directory offers renewalInfo (RFC 9773) and the CA's window for
    the stored certificate is over (from two days ago to one): although
    two thirds of its lifetime are left, rsp asks /renewal-info/CERTID
    (the planted certificate's certID: AKI keyIdentifier . serial), logs
    `renewing (the CA's renewal window opened)`, orders with "replaces":
    CERTID, and serves pebble's new certificate."""
    acme, relay, old, cert_id = ari_world(acme_world, ari_relays, renewal_window(-2 * DAY, -DAY))
    proxy = acme.start(acme=relay.acme_fields())
    acme.wait_log(proxy, f"acme: {A}: using the stored certificate, valid until ")
    acme.wait_log(proxy, f"acme: {A}: renewing (the CA's renewal window opened)")
    assert relay.cert_ids == [cert_id], f"rsp asked for the renewal information of {relay.cert_ids}, " \
                                        f"the planted certificate's certID is {cert_id}"
    acme.wait_obtained(proxy, A)
    new = acme.assert_serves(proxy, A)
    assert new != old.certificate
    assert len(relay.orders) == 1 and relay.orders[0].get("replaces") == cert_id, \
        f"newOrder payloads {relay.orders}: expected one with \"replaces\": {cert_id!r}"
    assert relay.orders[0]["identifiers"] == [{"type": "dns", "value": A}], relay.orders
    assert acme.pebble.orders() == 1
    assert acme.wait_state(proxy, A, "valid")["not_after"] == not_after(new)
    assert not log_lines(proxy, f"acme: {A}: renewing (valid until"), acme.describe(proxy)


@needs_pebble
def test_ari_window_ahead_keeps_the_certificate(acme_world, ari_relays):
    """The CA's window is a month ahead: rsp asks for it (the planted
    certificate's certID), logs `not due: the CA's renewal window is ...`
    and places no order; the stored certificate serves, "valid"."""
    acme, relay, old, cert_id = ari_world(acme_world, ari_relays, renewal_window(30 * DAY, 31 * DAY))
    proxy = acme.start(acme=relay.acme_fields())
    line = acme.wait_log(proxy, f"acme: {A}: not due: the CA's renewal window is ")[0]
    assert relay.cert_ids == [cert_id], f"rsp asked for the renewal information of {relay.cert_ids}, " \
                                        f"the planted certificate's certID is {cert_id}"
    assert_serves_planted(acme, proxy, old)
    assert relay.orders == [] and acme.pebble.orders() == 0, f"{line}\n{acme.describe(proxy)}"
    assert not log_lines(proxy, f"acme: {A}: renewing"), acme.describe(proxy)


UNUSABLE_RENEWAL_INFO = [
    ("not-json", b"<html>renewal information</html>"),
    ("no-window", b'{"explanationURL": "https://example.org/"}'),
    ("end-before-start", renewal_window(-DAY, -2 * DAY)),  # in the past: taken, it would renew
]


@needs_pebble
@pytest.mark.parametrize("body", [case[1] for case in UNUSABLE_RENEWAL_INFO],
                         ids=[case[0] for case in UNUSABLE_RENEWAL_INFO])
def test_ari_unusable_answer_keeps_the_certificate(acme_world, ari_relays, body):
    """renewalInfo answers garbage: rsp logs that the CA's renewal
    information is unusable, places no order, and the stored certificate
    (not due by the lifetime rule) serves, "valid"."""
    acme, relay, old, cert_id = ari_world(acme_world, ari_relays, body)
    proxy = acme.start(acme=relay.acme_fields())
    line = acme.wait_log(proxy, f"acme: {A}: the CA's renewal information is unusable (")[0]
    assert relay.cert_ids == [cert_id], f"rsp asked for the renewal information of {relay.cert_ids}, " \
                                        f"the planted certificate's certID is {cert_id}"
    assert_serves_planted(acme, proxy, old)
    assert relay.orders == [] and acme.pebble.orders() == 0, f"{line}\n{acme.describe(proxy)}"
    assert not log_lines(proxy, f"acme: {A}: renewing"), acme.describe(proxy)


@needs_pebble
def test_bad_nonces_still_end_with_a_certificate(acme_world):
    """PEBBLE_WFE_NONCEREJECT=50: pebble refuses half of the good nonces
    with badNonce; rsp retries each with the fresh nonce that came with
    the error and gets its certificate."""
    acme = acme_world(pebble_env={"PEBBLE_WFE_NONCEREJECT": "50"})
    assert "Configured to reject 50% of good nonces" in acme.pebble.log()
    proxy = acme.start()
    acme.wait_obtained(proxy, A, timeout=NONCE_TIMEOUT)
    acme.assert_serves(proxy, A)


# -- failures ---------------------------------------------------------------------------

@needs_pebble
def test_name_that_cannot_validate_backs_off(acme_world):
    """pebble's DNS sends it to 127.0.0.9 for bad.test, where nothing of
    rsp's listens: its validation fails. rsp logs `acme: bad.test: failed:
    ...; next attempt in 60 s` once, status.json says "failed" with the
    error and the next attempt a minute on, and rsp goes on: a.test gets
    its certificate, plain HTTP for bad.test is served."""
    acme = acme_world()
    acme.pebble.add_a(BAD, UNREACHABLE)
    proxy = acme.start(sites={A: [acme.backend], BAD: [acme.backend]})
    line = acme.wait_log(proxy, f"acme: {BAD}: failed: ")[0]
    assert line.endswith(f"; next attempt in {BACKOFF} s"), f"the failure line: {line!r}"
    acme.wait_obtained(proxy, A)
    acme.assert_serves(proxy, A)

    acme.wait_state(proxy, BAD, "failed")
    failures = log_lines(proxy, f"acme: {BAD}: failed: ")
    entry, now = cert_entry(proxy, BAD), time.time()
    assert entry["state"] == "failed" and entry["last_error"], f"a failed set with no last_error: {entry}"
    assert entry["not_after"] is None, entry
    assert entry["next_attempt"] is not None and now < entry["next_attempt"] <= now + BACKOFF + 1, \
        f"next_attempt {entry['next_attempt']} is not within the minute after now ({now:.0f}): {entry}"
    # The second attempt was not due when the log was read: one attempt, one line.
    assert len(failures) == 1, acme.describe(proxy)
    assert BAD in acme.pebble.validated_names()
    assert not os.path.exists(acme.path("certificates", f"{BAD}.crt"))
    assert served_by(get(proxy.port, "/echo", host=BAD)) == acme.backend.name
    assert acme.wait_state(proxy, A, "valid")["last_error"] is None


CONFIG_CASES = [("missing", None), ("false", False)]


@pytest.mark.parametrize("how", ["check", "start"])
@pytest.mark.parametrize("case, agree", CONFIG_CASES, ids=[c for c, _ in CONFIG_CASES])
def test_agree_to_terms_is_required(rsp, tmp_path, case, agree, how):
    """agree_to_terms missing or false is a config error naming it, with
    `rsp -t` and at start: exit status 1, one line; nothing contacted (the
    directory is a port nothing listens on: the config is refused before)."""
    acme = {"directory": f"https://{LOOPBACK}:{free_port()}/dir", "storage": str(tmp_path / "acme")}
    if agree is not None:
        acme["agree_to_terms"] = agree
    tls = {"listen": f"{LOOPBACK}:{free_port()}", "acme": acme}
    (path,) = proxy_arguments(rsp.stage, free_port(), [], str(tmp_path), {"sites": {A: [(LOOPBACK, 9)]}, "tls": tls})
    result = run_rsp(rsp, ["-t", path] if how == "check" else [path], tmp_path)
    line = assert_config_error(result, path, "tls.acme.agree_to_terms", words=("must be true",))
    assert line.startswith(f"rsp: {path}: setting 'tls.acme.agree_to_terms' must be true"), line


BAD_ACME_CASES = [
    # (id, fields changed in tls.acme, top-level options, sites, the setting named, words in the message)
    ("wildcard", {"domains": ["*.a.test"]}, {}, None, "tls.acme.domains[1]", ("wildcard", "dns-01")),
    ("not-a-name", {"domains": ["a test"]}, {}, None, "tls.acme.domains[1]", ("not a DNS name",)),
    ("ip-address", {"domains": ["127.0.0.1"]}, {}, None, "tls.acme.domains[1]", ("not a DNS name",)),
    ("twice", {"domains": [A, A.upper()]}, {}, None, "tls.acme.domains[2]", ("listed twice",)),
    ("set-of-numbers", {"domains": [[A, 5]]}, {}, None, "tls.acme.domains[1]", ("strings",)),
    ("empty-domains", {"domains": []}, {}, None, "tls.acme.domains", ("list the names",)),
    ("no-dns-site", {}, {}, {"localhost": [(LOOPBACK, 9)]}, "tls.acme.domains", ("no site name",)),
    ("challenge", {"challenges": ["dns-01"]}, {}, None, "tls.acme.challenges", ("http-01",)),
    ("challenge-twice", {"challenges": ["http-01", "http-01"]}, {}, None, "tls.acme.challenges", ()),
    ("http-directory", {"directory": "http://127.0.0.1:9/dir"}, {}, None, "tls.acme.directory", ("https://",)),
    ("relative-storage", {"storage": "acme"}, {}, None, "tls.acme.storage", ("absolute",)),
    ("missing-ca-root", {"ca_root": "/nonexistent/root.pem"}, {}, None, "tls.acme.ca_root", ("/nonexistent/root.pem",)),
    ("email", {"email": "nobody"}, {}, None, "tls.acme.email", ("email address",)),
    ("email-with-space", {"email": "me @example.org"}, {}, None, "tls.acme.email", ()),
    ("misspelt-field", {"domain": [A]}, {}, None, "tls.acme", ("domain",)),
    ("with-acme-webroot", {}, {"acme_webroot": "/tmp"}, None, "acme_webroot", ("tls.acme",)),
]


@pytest.mark.parametrize("fields, options, sites, setting, words",
                         [case[1:] for case in BAD_ACME_CASES], ids=[case[0] for case in BAD_ACME_CASES])
def test_bad_acme_block_is_refused(rsp, tmp_path, fields, options, sites, setting, words):
    """Each mistake in tls.acme is a config error naming the file and the
    setting (rsp -t, exit status 1, one line), before anything is
    contacted or made: the storage directory does not appear."""
    acme = {"agree_to_terms": True, "directory": f"https://{LOOPBACK}:{free_port()}/dir",
            "storage": str(tmp_path / "acme")}
    acme.update(fields)
    tls = {"listen": f"{LOOPBACK}:{free_port()}", "acme": acme}
    config = {"sites": sites or {A: [(LOOPBACK, 9)]}, "tls": tls, **options}
    (path,) = proxy_arguments(rsp.stage, free_port(), [], str(tmp_path), config)
    result = run_rsp(rsp, ["-t", path], tmp_path)
    assert_config_error(result, path, setting, words=words)
    assert not os.path.exists(tmp_path / "acme"), "rsp -t made the storage directory"


def test_check_touches_no_network(rsp, tmp_path):
    """rsp -t with a valid acme block says ok and connects to nothing: the
    directory is a socket of the test's, which has no connection to
    accept once rsp -t has exited."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as directory:
        directory.bind((LOOPBACK, free_port()))
        directory.listen(8)
        acme = {"agree_to_terms": True, "directory": f"https://{LOOPBACK}:{directory.getsockname()[1]}/dir",
                "storage": str(tmp_path / "acme")}
        tls = {"listen": f"{LOOPBACK}:{free_port()}", "acme": acme}
        (path,) = proxy_arguments(rsp.stage, free_port(), [], str(tmp_path),
                                  {"sites": {A: [(LOOPBACK, 9)]}, "tls": tls})
        result = run_rsp(rsp, ["-t", path], tmp_path)
        assert result.returncode == 0, f"exit status {result.returncode}, stderr: {result.stderr!r}"
        directory.setblocking(False)
        try:
            conn, _ = directory.accept()
        except BlockingIOError:
            return
        conn.close()
        pytest.fail("rsp -t connected to the ACME directory")


@needs_pebble
def test_name_covered_by_certificates_is_not_ordered(acme_world, tmp_path):
    """Sites a.test and other.test, no domains given, other.test in
    tls.certificates: only a.test is ordered; other.test keeps its
    configured certificate, nothing of it in the log, status or storage."""
    acme = acme_world()
    other = session_ca().issue(tmp_path, "other", [OTHER], key_type="ec")
    proxy = acme.start(sites={A: [acme.backend], OTHER: [acme.backend]}, certificates=[other])
    acme.wait_obtained(proxy, A)
    acme.assert_serves(proxy, A)
    acme.wait_state(proxy, A, "valid")
    assert acme.pebble.orders() == 1 and acme.pebble.validated_names() == [A], acme.pebble.log()[-3000:]
    r = https_get(proxy.tls_port, "/echo", session_ca().client_context(), OTHER)
    assert r.status == 200 and r.peer_fingerprint == other.fingerprint, r
    assert not log_lines(proxy, f"acme: {OTHER}"), acme.describe(proxy)
    assert [e["names"] for e in cert_entries(proxy)] == [[A]]
    assert not [f for f in os.listdir(acme.path("certificates")) if f.startswith(OTHER)]


# -- processes and users ----------------------------------------------------------------------

@needs_pebble
def test_two_processes_one_storage_one_order(acme_world):
    """Two rsp processes started together with one storage directory (each
    on its own ports; pebble validates on the first's, which answers from
    the shared storage whichever of them ordered): one order in pebble's
    log, one `certificate obtained` line between them, and both serve the
    certificate that one wrote."""
    acme = acme_world()
    first = acme.start()
    second = acme.start(plain_port=free_port(), tls_port=free_port())
    for proxy in (first, second):
        acme.wait(proxy, lambda: issued_by_pebble(acme, proxy.tls_port, A),
                  f"rsp (pid {proxy.pid}) serving a.test's certificate from pebble")
    obtained = log_lines(first, "certificate obtained") + log_lines(second, "certificate obtained")
    assert len(obtained) == 1 and acme.pebble.orders() == 1, \
        f"{acme.pebble.orders()} orders; `certificate obtained` lines: {obtained}\n" \
        f"--- first ---\n{first.stderr()}--- second ---\n{second.stderr()}"
    for proxy in (first, second):
        acme.assert_serves(proxy, A)


@needs_pebble
def test_workers_all_serve_it(acme_world):
    """workers = 2: the master orders; each worker (a connection put on it
    by stopping the other) serves the new certificate (polled, bounded:
    the master may log it a moment before a worker has it), then on three
    more connections each, every one verified against pebble's root and
    answered by the backend."""
    acme = acme_world()
    proxy = acme.start(workers=2)
    pids = started_workers(proxy, 2)
    acme.wait_obtained(proxy, A)
    stored = fingerprint(acme.stored_leaf(A).public_bytes(serialization.Encoding.DER))
    for pid in pids:
        acme.wait(proxy, lambda: worker_verifies(acme, proxy, pid, pids),
                  f"worker {pid} serving a.test's certificate from pebble", POLL_TIMEOUT)
        for _ in range(3):
            with tls_conn_on_worker(proxy, acme.context(), pid, pids, server_name=A) as conn:
                assert conn.peer_fingerprint == stored, f"worker {pid} presents {describe_cert(conn.peer_cert)}"
                r = conn.get("/echo")
                assert served_by(r) == acme.backend.name and r.json()["path"] == "/echo", r
    assert acme.pebble.orders() == 1
    assert len(log_lines(proxy, "certificate obtained")) == 1, acme.describe(proxy)


def worker_verifies(acme, proxy, pid, pids):
    """True if worker `pid` presents, for a.test, a certificate that
    verifies against pebble's root."""
    try:
        conn = tls_conn_on_worker(proxy, acme.context(), pid, pids, server_name=A)
    except OSError:  # ssl.SSLError too: not verified, or no certificate at all
        return False
    conn.close()
    return True


@needs_pebble
def test_user_nobody_owns_the_storage(acme_world, shared_dir):
    """As root with user = "nobody": rsp runs as nobody and still gets its
    certificate; the storage and everything in it belong to nobody,
    directories 0700, files 0600."""
    user = nobody()
    acme = acme_world(workdir=shared_dir)
    proxy = acme.start(user="nobody")
    assert proc_uid(proxy.pid) == user.pw_uid, "rsp did not become nobody"
    acme.wait_obtained(proxy, A)
    acme.assert_serves(proxy, A)
    for directory, _, files in os.walk(acme.storage):
        for path, wanted in [(directory, 0o700)] + [(os.path.join(directory, f), 0o600) for f in files]:
            info = os.stat(path)
            assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (user.pw_uid, wanted), \
                f"{path}: uid {info.st_uid} mode {stat.S_IMODE(info.st_mode):04o}, " \
                f"expected nobody's ({user.pw_uid}) and {wanted:04o}"
    assert proc_uid(proxy.pid) == user.pw_uid


@needs_pebble
def test_storage_files_and_modes(acme_world):
    """Under umask 000, rsp creates the storage 0700 and writes 0600: the
    account key (ECDSA P-256, PEM), the certificate's key and its chain
    (leaf, then pebble's intermediate); the key is the leaf's; nothing
    else but the lock in certificates/, no token left in challenges/."""
    acme = acme_world()
    old_umask = os.umask(0)
    try:
        proxy = acme.start()
    finally:
        os.umask(old_umask)
    acme.wait_obtained(proxy, A)
    leaf = acme.assert_serves(proxy, A)
    for path, wanted in ((acme.storage, 0o700), (acme.path("certificates"), 0o700),
                         (acme.path("account.key"), 0o600), (acme.path("certificates", f"{A}.key"), 0o600),
                         (acme.path("certificates", f"{A}.crt"), 0o600)):
        assert mode(path) == wanted, f"{path} is {mode(path):04o}, expected {wanted:04o}"
    extra = set(os.listdir(acme.path("certificates"))) - {f"{A}.crt", f"{A}.key", f"{A}.lock"}
    assert not extra, f"files left in certificates/: {sorted(extra)}"
    if os.path.exists(acme.path("challenges")):
        assert mode(acme.path("challenges")) == 0o700
        left = [os.path.join(d, f) for d, _, files in os.walk(acme.path("challenges")) for f in files]
        assert not left, f"challenge tokens left behind: {left}"

    with open(acme.path("account.key"), "rb") as f:
        account = serialization.load_pem_private_key(f.read(), password=None)
    assert isinstance(account, ec.EllipticCurvePrivateKey) and account.curve.name == "secp256r1", account
    with open(acme.path("certificates", f"{A}.key"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    chain = pem_certificates(acme.path("certificates", f"{A}.crt"))
    assert chain[0] == leaf and len(chain) >= 2, f"{A}.crt holds {[describe_cert(c) for c in chain]}"
    assert chain[1].subject == leaf.issuer, "the second certificate is not the leaf's issuer"
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(serialization.Encoding.DER, public) == \
        leaf.public_key().public_bytes(serialization.Encoding.DER, public), f"{A}.key is not the leaf's key"
