"""Let's Encrypt's way, end to end (stage 15): certbot gets a certificate
from a real ACME server through rsp's acme_webroot, and its deploy hook
makes rsp serve it.

Nothing is short-cut: pebble (Let's Encrypt's test ACME server) really
validates the HTTP-01 challenge by fetching
http://rsp-acme.test:PORT/.well-known/acme-challenge/TOKEN, where PORT is
rsp's plain listener (pebble's httpPort) and the name resolves to
127.0.0.1 through pebble-challtestsrv, run as a mock DNS server only.
certbot's webroot plugin writes the token under acme_webroot, rsp serves
it from there (never from the backend), pebble issues, certbot writes
config-dir/live/rsp-acme.test/{fullchain,privkey}.pem and runs its
deploy hook, `kill -HUP PID`: what an operator's `systemctl reload rsp`
does. The test then speaks TLS to rsp with SNI rsp-acme.test trusting
only pebble's root: the chain must verify (so rsp sends the intermediate
too, from fullchain.pem), the leaf must be the one certbot wrote, and the
request must reach the backend.

The setup mirrors a real server's:
  - rsp must start with a valid certificate, and certbot's files do not
    exist before its first run: rsp starts with a throwaway one (as an
    operator might with a self-signed placeholder). The config is then
    rewritten the way the operator wants it once the site has a real
    certificate (tls.certificates naming certbot's live/ paths, and
    tls.redirect_http = true) and left for certbot's deploy hook to
    load: the first issuance's reload is the hook's. Plain HTTP is then
    a 301 to https://, except the challenges.
  - Then a renewal, `certbot renew --force-renewal`, with no hook on the
    command line: certbot runs the deploy hook it saved in its renewal
    config (a real server's timer runs a bare `certbot renew`). The
    config file is unchanged, the live/ symlinks now point at new files:
    the reload must read the certificate files again, not keep what it
    had loaded from the same paths. That is the case that matters every
    60 days, and it is validated while plain HTTP redirects: each
    challenge request must still be answered 200 from acme_webroot, not
    301.
  - The second test is the shipped config's case (dist/rsp.lua sets
    user): rsp, started as root with user = "nobody", reloads as nobody
    and cannot read certbot's key where certbot keeps it (0600 root, in
    0700 directories; a reload pointing there fails with "Permission
    denied" and the old certificate goes on being served). Its deploy
    hook is a script that copies the lineage into rsp's own directory
    (the key 0640, group nobody's) and then sends SIGHUP; the config
    names those copies from the start (the placeholder until then) and
    never changes. Root only, like test_operations.py's user tests.
pebble is told not to reuse authorizations (PEBBLE_AUTHZREUSE=0, which
still lets one in a hundred through), and the renewal's order comes from
a new account (Site.fresh_account), so the renewal is validated through
rsp again, every time; PEBBLE_VA_NOSLEEP=1 spares
its validation's random sleep and PEBBLE_WFE_NONCEREJECT=0 its random
rejection of good nonces (both are pebble's ways of testing a client's
patience, not rsp's). No PEBBLE_VA_ALWAYS_VALID: validation is real.

Every pebble validation request (pebble's log names each token) must be
in rsp's access log as a 200; the backend gets none of them. Everything
is bounded: certbot gets CERTBOT_TIMEOUT s, each server START_TIMEOUT s
to come up; pebble and the mock DNS are stopped at teardown. Skipped if
pebble, pebble-challtestsrv, certbot or python3-trustme is missing
(./setup-env.sh installs them).
"""

import glob
import hashlib
import os
import re
import shutil
import socket
import ssl
import subprocess

import pytest

from checks import log_lines, nobody, proc_uid, wait_for_log
from client import build_request, get, read_response
from netutil import LOOPBACK, free_port, wait_for, wait_until_listening
from pebble import START_TIMEOUT, challenge_lines, daemons, missing_tools, start_pebble  # noqa: F401 (fixtures)
from proxy import backend_address, proxy_arguments

MISSING = missing_tools("certbot")

pytestmark = [
    pytest.mark.stage(15),
    pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed "
                                              f"(./setup-env.sh installs pebble and certbot)"),
]

NAME = "rsp-acme.test"    # resolved to 127.0.0.1 by the mock DNS, for pebble only
CERTBOT_TIMEOUT = 50.0    # s: a bound on one certbot run (about 2 s here; two fit in the 120 s guard)
RELOAD_TIMEOUT = 10.0     # s: a bound on rsp logging the deploy hook's reload


# -- certbot ---------------------------------------------------------------------------------

class Certbot:
    """certbot with every directory of its own under `work` and trusting
    pebble's API certificate (REQUESTS_CA_BUNDLE): nothing of the
    machine's /etc/letsencrypt is touched."""

    def __init__(self, work, pebble):
        os.makedirs(work, exist_ok=True)
        self.work = work
        self.pebble = pebble
        self.config_dir = os.path.join(work, "config")
        self.live = os.path.join(self.config_dir, "live", NAME)

    def run(self, *args):
        dirs = ["--config-dir", self.config_dir, "--work-dir", os.path.join(self.work, "work"),
                "--logs-dir", os.path.join(self.work, "logs")]
        env = dict(os.environ, REQUESTS_CA_BUNDLE=self.pebble.api_ca, HOME=self.work,
                   XDG_CONFIG_HOME=os.path.join(self.work, "xdg"))
        argv = ["certbot", *args, *dirs, "--non-interactive"]
        try:
            result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                                    cwd=self.work, timeout=CERTBOT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"certbot still running after {CERTBOT_TIMEOUT} s: {' '.join(argv)}\n{self.logs()}",
                        pytrace=False)
        assert result.returncode == 0, (f"{' '.join(argv)} exited with status {result.returncode}\n"
                                        f"--- stdout ---\n{result.stdout}--- stderr ---\n{result.stderr}"
                                        f"{self.logs()}")
        return result

    def logs(self):
        """The end of certbot's debug log and pebble's log, for a failure message."""
        text = ""
        path = os.path.join(self.work, "logs", "letsencrypt.log")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                text += "--- certbot's letsencrypt.log (end) ---\n" + f.read()[-6000:]
        return text + "--- pebble's log ---\n" + self.pebble.daemon.log()[-6000:]


# -- certificates and TLS --------------------------------------------------------------------

def pem_blocks(text):
    return re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", text, re.S)


def fingerprint_of_pem(path):
    """SHA-256 of the first certificate in the PEM file `path` (DER)."""
    with open(path) as f:
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem_blocks(f.read())[0])).hexdigest()


def tls_get(port, cafile, path="/"):
    """GET `path` over TLS from rsp's TLS listener with SNI NAME, trusting
    only `cafile` (hostname checked): returns (the SHA-256 of the leaf
    certificate rsp sent, the Response). A failed verification raises
    ssl.SSLCertVerificationError."""
    context = ssl.create_default_context(cafile=cafile)  # only cafile: no system CAs
    with socket.create_connection((LOOPBACK, port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=NAME) as sock:
            leaf = hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()
            sock.sendall(build_request(port, path=path, host=NAME))
            return leaf, read_response(sock)


def served_fingerprint(port):
    """SHA-256 of the leaf certificate rsp presents for SNI NAME, whoever
    signed it (no verification)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((LOOPBACK, port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=NAME) as sock:
            return hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()


def assert_validated_through_rsp(pebble, access_log, backend, orders):
    """Every validation request pebble made (`orders` challenges so far,
    each token fetched at least once) is a 200 in rsp's access log, and
    the backend saw none of them. Returns the tokens."""
    # pebble's log is read from the file its output goes to: give the line
    # of the last validation a bounded moment to get there.
    wait_for(lambda: len(set(pebble.validation_tokens(NAME))) >= orders,
             f"{orders} tokens validated in pebble's log", RELOAD_TIMEOUT)
    tokens = pebble.validation_tokens(NAME)
    assert len(set(tokens)) == orders, f"pebble validated {sorted(set(tokens))}, expected {orders} tokens"
    expected = sorted((token, "200") for token in tokens)
    wait_for(lambda: sorted(challenge_lines(access_log)) == expected,
             f"each of pebble's {len(tokens)} validation requests logged as a 200 "
             f"(the access log has {challenge_lines(access_log)})", RELOAD_TIMEOUT)
    forwarded = [path for path in backend.hits if path.startswith("/.well-known/")]
    assert not forwarded, f"challenge requests reached the backend: {forwarded}"
    return set(tokens)


def write_placeholder(directory, key_group=None):
    """A throwaway certificate for NAME (from a trustme CA nobody trusts)
    as directory/fullchain.pem and directory/privkey.pem: what rsp starts
    with before certbot's first run. key_group: the key's group, mode 0640.
    Returns the paths."""
    trustme = pytest.importorskip("trustme", reason="python3-trustme is not installed (./setup-env.sh installs it)")
    chain, key = os.path.join(directory, "fullchain.pem"), os.path.join(directory, "privkey.pem")
    leaf = trustme.CA().issue_cert(NAME)
    with open(chain, "wb") as f:
        for blob in leaf.cert_chain_pems:
            f.write(blob.bytes())
    leaf.private_key_pem.write_to_path(key)
    os.chmod(chain, 0o644)
    os.chmod(key, 0o600)
    if key_group is not None:
        os.chown(key, 0, key_group)
        os.chmod(key, 0o640)
    return chain, key


class Site:
    """What both tests set up: a backend, an acme_webroot, an access log
    and a TLS port, all under `directory`; then rsp (started by the test),
    pebble validating on rsp's plain port, pebble's root and certbot."""

    def __init__(self, directory, backend, tls_port):
        self.directory = directory
        self.backend = backend
        self.tls_port = tls_port
        self.webroot = os.path.join(directory, "acme-webroot")
        os.mkdir(self.webroot)
        os.chmod(self.webroot, 0o755)
        self.access_log = os.path.join(directory, "access.log")
        self.proxy = self.pebble = self.root = self.certbot = None

    def options(self, cert, key, **tls):
        """start_proxy's options: the tls table with one certificate (and
        any other tls fields), acme_webroot, access_log."""
        tls = {"listen": f"{LOOPBACK}:{self.tls_port}", "certificates": [{"cert": cert, "key": key}], **tls}
        return {"tls": tls, "acme_webroot": self.webroot, "access_log": self.access_log}

    def started(self, proxy, start_pebble, placeholder):
        """rsp is running: checks it serves the placeholder, then starts
        pebble and gets its root."""
        self.proxy = proxy
        wait_until_listening(self.tls_port, proxy.process, START_TIMEOUT, what="rsp's TLS listener")
        assert served_fingerprint(self.tls_port) == fingerprint_of_pem(placeholder)
        self.pebble = start_pebble(proxy.port)  # it validates at http://rsp-acme.test:PROXY_PORT/
        self.root = os.path.join(self.directory, "pebble-root.pem")
        with open(self.root, "w") as f:
            f.write(self.pebble.root_pem())
        self.certbot = Certbot(os.path.join(self.directory, "certbot"), self.pebble)

    def certonly(self, hook):
        """certbot's first run, with `hook` as its deploy hook."""
        self.certbot.run("certonly", "--webroot", "-w", self.webroot, "-d", NAME, "--server", self.pebble.directory,
                         "--agree-tos", "--register-unsafely-without-email", "--no-eff-email",
                         "--deploy-hook", hook)
        for name in ("fullchain.pem", "privkey.pem", "cert.pem", "chain.pem"):
            assert os.path.isfile(os.path.join(self.certbot.live, name)), f"certbot wrote no live/{NAME}/{name}"
        with open(os.path.join(self.certbot.config_dir, "renewal", f"{NAME}.conf")) as f:
            assert f"renew_hook = {hook}\n" in f.read(), "certbot did not save the deploy hook for renewals"

    def renew(self):
        """A bare `certbot renew` (forced: the certificate is fresh), as a
        server's timer runs it: it runs the deploy hook certonly saved. Its
        order is made by a new account (fresh_account), so pebble must
        validate it."""
        self.fresh_account()
        self.certbot.run("renew", "--force-renewal", "--no-random-sleep-on-renew")

    def fresh_account(self):
        """Points the saved renewal at a new ACME account. pebble reuses a
        valid authorization of the same account even with
        PEBBLE_AUTHZREUSE=0 (it makes a new one only when a random number
        below 100 is greater than that percentage: 99 times in 100), and a
        reused authorization is not validated again; a new account has
        none to reuse. certbot registers it in a config directory of its
        own (it refuses a second account for one server), and the account
        moves into ours."""
        other = Certbot(os.path.join(self.certbot.work, "second-account"), self.pebble)
        other.run("register", "--server", self.pebble.directory, "--agree-tos",
                  "--register-unsafely-without-email", "--no-eff-email")
        made = glob.glob(os.path.join(other.config_dir, "accounts", "*", "*", "*", "regr.json"))
        assert len(made) == 1, f"certbot register made {made}"
        account = os.path.dirname(made[0])
        ours = os.path.join(self.certbot.config_dir, os.path.relpath(account, other.config_dir))
        assert not os.path.exists(ours), f"{ours} exists already"
        shutil.copytree(account, ours)
        renewal = os.path.join(self.certbot.config_dir, "renewal", f"{NAME}.conf")
        with open(renewal) as f:
            text = f.read()
        text, n = re.subn(r"^account = \S+$", f"account = {os.path.basename(account)}", text, flags=re.M)
        assert n == 1, f"no 'account = ' line in {renewal}:\n{text}"
        with open(renewal, "w") as f:
            f.write(text)

    def assert_deployed(self, generation, orders):
        """After certbot's run number `orders`: its deploy hook reloaded rsp
        (same process, `generation` reached, no failed reload), every
        validation request so far came through rsp's acme_webroot as a 200
        and none reached the backend, and rsp's TLS listener presents
        certbot's newest certificate (archive/NAME/certORDERS.pem) with a
        chain that verifies up to pebble's root alone, and forwards."""
        proxy, certbot = self.proxy, self.certbot
        wait_for_log(proxy, f"reloaded {proxy.args[0]}: generation {generation}", RELOAD_TIMEOUT)
        assert proxy.alive(), proxy.describe()
        assert not log_lines(proxy, "reload failed"), proxy.describe()
        assert len(log_lines(proxy, "reloaded ")) == generation - 1, proxy.describe()
        assert_validated_through_rsp(self.pebble, self.access_log, self.backend, orders)

        expected = fingerprint_of_pem(os.path.join(certbot.config_dir, "archive", NAME, f"cert{orders}.pem"))
        assert fingerprint_of_pem(os.path.join(certbot.live, "cert.pem")) == expected
        hits = self.backend.hits["/echo"]
        leaf, response = tls_get(self.tls_port, self.root, "/echo")
        assert leaf == expected, (f"rsp serves {leaf}, not the certificate certbot wrote last ({expected})\n"
                                  f"{proxy.describe()}")
        assert response.status == 200, f"{response!r}\n{response.raw[:500]!r}"
        assert response.json()["backend"] == self.backend.name
        assert response.json()["path"] == "/echo"
        assert self.backend.hits["/echo"] == hits + 1

    def assert_redirects(self):
        """Plain HTTP other than a challenge is a 301 to https://, not forwarded."""
        hits = self.backend.hits["/echo"]
        redirected = get(self.proxy.port, "/echo?x=1", host=NAME)
        assert redirected.status == 301, redirected.raw[:500]
        assert redirected.header("Location") == f"https://{NAME}:{self.tls_port}/echo?x=1", redirected.raw[:500]
        assert self.backend.hits["/echo"] == hits, "the redirected request reached the backend"


def test_certbot_webroot_through_rsp_and_deploy_hook_reload(rsp, start_proxy, make_backend, start_pebble,
                                                           tmp_path):
    """certbot certonly --webroot -w ACME_WEBROOT against pebble, validated
    through rsp's plain listener; the deploy hook (`kill -HUP PID`) makes
    rsp serve the new certificate (its config rewritten meanwhile to
    certbot's live/ paths, with redirect_http); then `certbot renew
    --force-renewal`: the saved hook's SIGHUP makes rsp read the renewed
    files from the same paths, the validation coming through while plain
    HTTP redirects. Same pid throughout, two `reloaded` lines, no failed
    reload."""
    backend = make_backend("a")
    site = Site(str(tmp_path), backend, free_port())
    placeholder = tmp_path / "placeholder"
    placeholder.mkdir()
    chain, key = write_placeholder(str(placeholder))
    proxy = start_proxy(backend, **site.options(chain, key))
    site.started(proxy, start_pebble, chain)

    # The operator's config names certbot's files and, now that the site
    # will have a real certificate, sends plain HTTP to HTTPS; rsp goes on
    # with the placeholder and no redirect until certbot's deploy hook
    # reloads it.
    live = site.certbot.live
    proxy_arguments(rsp.stage, proxy.port, [backend_address(backend)], str(tmp_path),
                    site.options(os.path.join(live, "fullchain.pem"), os.path.join(live, "privkey.pem"),
                                 redirect_http=True))
    site.certonly(f"kill -HUP {proxy.pid}")
    site.assert_deployed(generation=2, orders=1)
    site.assert_redirects()

    site.renew()
    site.assert_deployed(generation=3, orders=2)
    site.assert_redirects()


DEPLOY_HOOK = """#!/bin/sh
# certbot's deploy hook for an rsp that runs as an unprivileged user
# (user = "..."): certbot's private key is root's alone (0600, in 0700
# directories), and rsp is no longer root when it reloads. So the hook
# copies the lineage where rsp's group may read it, then reloads rsp.
set -e
cd {tls_dir}
install -m 0644 "$RENEWED_LINEAGE/fullchain.pem" fullchain.pem.new
install -m 0640 -g {group} "$RENEWED_LINEAGE/privkey.pem" privkey.pem.new
mv -f fullchain.pem.new fullchain.pem
mv -f privkey.pem.new privkey.pem
kill -HUP {pid}
"""


def test_certbot_deploy_hook_for_rsp_running_as_user(rsp, start_proxy, make_backend, start_pebble, shared_dir):
    """The shipped config's setup (dist/rsp.lua sets user): started as root
    with user = "nobody", rsp reloads as nobody, and cannot read certbot's
    key where certbot keeps it (live/ and archive/ are 0700 root, the key
    0600). The documented way: the deploy hook (a script, as an operator
    would install it) copies fullchain.pem and privkey.pem into rsp's own
    directory (the key 0640, group nobody's) and then sends SIGHUP. The
    config names those copies from the start (the placeholder until
    certbot's first run) and never changes. First issuance and a forced
    renewal, each served after the hook's reload; the acme_webroot files
    (certbot writes them 0644 in 0755 directories) read as nobody; rsp's
    uid nobody's throughout."""
    user = nobody()
    backend = make_backend("a")
    site = Site(shared_dir, backend, free_port())
    tls_dir = os.path.join(shared_dir, "tls")
    os.mkdir(tls_dir)
    os.chown(tls_dir, 0, user.pw_gid)
    os.chmod(tls_dir, 0o750)
    chain, key = write_placeholder(tls_dir, key_group=user.pw_gid)
    port = free_port()
    options = dict(site.options(chain, key, redirect_http=True), user="nobody")
    args = proxy_arguments(rsp.stage, port, [backend_address(backend)], shared_dir, options)
    os.chmod(args[0], 0o644)  # nobody reads it again on every reload
    proxy = start_proxy(args=args, port=port)
    assert proc_uid(proxy.pid) == user.pw_uid, "rsp did not become nobody"
    site.started(proxy, start_pebble, chain)

    hook = os.path.join(shared_dir, "rsp-deploy-hook")
    with open(hook, "w") as f:
        f.write(DEPLOY_HOOK.format(tls_dir=tls_dir, group=user.pw_gid, pid=proxy.pid))
    os.chmod(hook, 0o755)
    site.certonly(hook)
    site.assert_deployed(generation=2, orders=1)
    site.assert_redirects()

    site.renew()
    site.assert_deployed(generation=3, orders=2)
    assert proc_uid(proxy.pid) == user.pw_uid

