"""pebble (Let's Encrypt's test ACME server) and pebble-challtestsrv (its
mock DNS) for the tests that get certificates from a real ACME server:
certbot through rsp's acme_webroot (test_acme.py, stage 15) and rsp's own
ACME client (test_auto_https.py, stage 19).

    pytestmark = pytest.mark.skipif(bool(missing_tools()), reason=...)
    from pebble import daemons, start_pebble     # both: a fixture needs the other
    pebble = start_pebble(http_port, tls_port)   # validates on those ports of 127.0.0.1
    pebble.directory, pebble.api_ca              # the directory URL, the CA its HTTPS is from
    pebble.root_pem()                            # the root it issues under (trust this)
    pebble.orders(), pebble.validated_names()    # from its log
    pebble.add_a("bad.test", "127.0.0.9")        # the mock DNS answers that for the name

The mock DNS answers every A query with 127.0.0.1 (no AAAA) and runs none
of challtestsrv's own challenge servers: every validation reaches rsp's
listeners on http_port (http-01) and tls_port (tls-alpn-01). pebble runs
with PEBBLE_VA_NOSLEEP=1 (no random sleep before a validation),
PEBBLE_AUTHZREUSE=0 (a new authorization per order, nearly always: one in
a hundred is still reused for the same account) and
PEBBLE_WFE_NONCEREJECT=0 (no good nonce rejected), unless the test's `env`
says otherwise; never PEBBLE_VA_ALWAYS_VALID: validation is real. Every
port comes from netutil's allocator and every test has a pebble of its
own, so tests run side by side; both servers are stopped at teardown.
"""

import json
import os
import re
import shutil
import ssl
import subprocess
import urllib.request

import pytest

from conftest import _stopped_at_teardown
from netutil import LOOPBACK, free_port, wait_until_listening
from proxy import stop_process

START_TIMEOUT = 10.0  # s: a bound on a server coming up
STOP_TIMEOUT = 5.0
CHALLENGE = "/.well-known/acme-challenge/"
TOOLS = ("pebble", "pebble-challtestsrv")


def missing_tools(*more):
    """The programs among pebble, pebble-challtestsrv and `more` that are
    not installed (for a skipif)."""
    return [tool for tool in (*TOOLS, *more) if shutil.which(tool) is None]


class Daemon:
    """A server process started by the test, its output in a log file."""

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env=env, cwd=os.path.dirname(log_path))

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        stop_process(self.process, STOP_TIMEOUT)


@pytest.fixture
def daemons():
    """daemons(name, argv, log_path, env=None) starts a Daemon; each is
    stopped at teardown."""
    yield from _stopped_at_teardown(Daemon)


def wait_listening(daemon, port):
    try:
        wait_until_listening(port, daemon.process, START_TIMEOUT, what=daemon.name)
    except RuntimeError as e:
        pytest.fail(f"{e}\n--- {daemon.name}'s output ---\n{daemon.log()}", pytrace=False)


class Pebble:
    """A running pebble: its directory URL, the CA its API certificate is
    from (api_ca, a file), its management port, its log, and the mock
    DNS's management port (dns_management_port)."""

    def __init__(self, daemon, directory, api_ca, management_port, dns_management_port):
        self.daemon = daemon
        self.directory = directory
        self.api_ca = api_ca
        self.management_port = management_port
        self.dns_management_port = dns_management_port

    def fetch(self, url):
        context = ssl.create_default_context(cafile=self.api_ca)
        with urllib.request.urlopen(url, context=context, timeout=START_TIMEOUT) as answer:
            return answer.read()

    def root_pem(self):
        """pebble's root CA certificate (a new one each run): what a client
        trusts, like ISRG Root X1."""
        return self.fetch(f"https://{LOOPBACK}:{self.management_port}/roots/0").decode()

    def log(self):
        return self.daemon.log()

    def validation_tokens(self, name):
        """The token of every HTTP-01 validation request pebble made for
        `name`, in order."""
        return re.findall(rf"Attempting to validate w/ HTTP: http://{re.escape(name)}:\d+"
                          rf"{re.escape(CHALLENGE)}(\S+)", self.log())

    def http_validations(self):
        """The URL of every HTTP-01 validation request pebble made."""
        return re.findall(r"Attempting to validate w/ HTTP: (\S+)", self.log())

    def orders(self):
        """How many orders pebble accepted (newOrder requests that made one;
        a request it refused, e.g. for a bad nonce, made none)."""
        return len(re.findall(r'^Pebble .* Added order "[^"]+" to the db$', self.log(), re.M))

    def validated_names(self):
        """The name of every authorization pebble started validating (one
        task per challenge a client asked it to check), in order."""
        return re.findall(r'Pulled a task from the Tasks queue: .*Identifier:acme\.Identifier\{Type:"dns", '
                          r'Value:"([^"]+)"\}', self.log())

    def add_a(self, host, address):
        """Makes the mock DNS answer A queries for `host` with `address`
        (instead of 127.0.0.1), through its management API."""
        body = json.dumps({"host": host, "addresses": [address]}).encode()
        url = f"http://{LOOPBACK}:{self.dns_management_port}/add-a"
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=START_TIMEOUT) as answer:
            assert answer.status == 200, f"challtestsrv's /add-a answered {answer.status}"


@pytest.fixture
def start_pebble(daemons, tmp_path):
    """start_pebble(http_port, tls_port=None, env=None) starts
    pebble-challtestsrv as a mock DNS server only (every A query answered
    127.0.0.1, no AAAA, none of its challenge servers) and pebble using
    it, validating HTTP-01 challenges on http_port and TLS-ALPN-01 on
    tls_port (None: a free port nothing listens on); `env` adds to (or
    overrides) pebble's environment (see the module's docstring). Returns
    the Pebble once its directory answers."""
    trustme = pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")

    def start(http_port, tls_port=None, env=None):
        work = tmp_path / "pebble"
        work.mkdir()
        dns_port, dns_management_port = free_port(), free_port()
        dns = daemons("pebble-challtestsrv",
                      ["pebble-challtestsrv", "-defaultIPv4", LOOPBACK, "-defaultIPv6", "",
                       "-http01", "", "-https01", "", "-tlsalpn01", "",
                       "-dns01", f"{LOOPBACK}:{dns_port}", "-management", f"{LOOPBACK}:{dns_management_port}"],
                      str(work / "challtestsrv.log"))
        wait_listening(dns, dns_port)
        wait_listening(dns, dns_management_port)

        api_ca = trustme.CA()
        api_cert = api_ca.issue_cert(LOOPBACK, "localhost")
        api_cert.cert_chain_pems[0].write_to_path(str(work / "api-cert.pem"))
        api_cert.private_key_pem.write_to_path(str(work / "api-key.pem"))
        api_ca.cert_pem.write_to_path(str(work / "api-ca.pem"))
        port, management_port = free_port(), free_port()
        config = {"pebble": {
            "listenAddress": f"{LOOPBACK}:{port}",
            "managementListenAddress": f"{LOOPBACK}:{management_port}",
            "certificate": str(work / "api-cert.pem"),
            "privateKey": str(work / "api-key.pem"),
            "httpPort": http_port,
            "tlsPort": free_port() if tls_port is None else tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": False,
        }}
        (work / "pebble.json").write_text(json.dumps(config, indent=2))
        pebble_env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0", PEBBLE_AUTHZREUSE="0")
        pebble_env.pop("PEBBLE_VA_ALWAYS_VALID", None)
        pebble_env.update(env or {})
        daemon = daemons("pebble", ["pebble", "-config", str(work / "pebble.json"),
                                    "-dnsserver", f"{LOOPBACK}:{dns_port}"],
                         str(work / "pebble.log"), env=pebble_env)
        wait_listening(daemon, port)
        wait_listening(daemon, management_port)
        pebble = Pebble(daemon, f"https://{LOOPBACK}:{port}/dir", str(work / "api-ca.pem"), management_port,
                        dns_management_port)
        assert "newOrder" in json.loads(pebble.fetch(pebble.directory)), daemon.log()
        return pebble

    return start


def challenge_lines(access_log):
    """rsp's access log's lines for challenge requests: [(token, status)]."""
    if not os.path.exists(access_log):
        return []
    with open(access_log, errors="replace") as f:
        return re.findall(rf'"GET {re.escape(CHALLENGE)}(\S+) HTTP/1\.[01]" (\d{{3}}) ', f.read())
