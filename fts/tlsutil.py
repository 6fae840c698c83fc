"""TLS for the tests (stages 14 and 15): a throwaway certificate authority, the
certificates and keys rsp is configured with, and clients that speak
HTTPS over raw sockets.

    ca = session_ca()                             # one per test session
    cert = ca.issue(tmp_path, "www", ["www.example.test"])
    cert.cert, cert.key                           # PEM files for tls.certificates
    ctx = ca.client_context()                     # trusts the CA (and nothing else)
    r = https_get(port, "/echo", ctx, "www.example.test")
    r.status, r.headers, r.body, r.peer_cert, r.tls_version
    with TLSConn(port, ctx, "www.example.test") as c:   # keep-alive, like client.Conn
        c.get("/echo"); c.get("/bytes?n=10")

The CA is trustme's (python3-trustme); the leaf certificates are made here
with the `cryptography` module trustme is built on, so that a test can
choose their names (a wildcard "*.example.test" too), key type (RSA or
ECDSA P-256), the key file's format (PKCS#8 "BEGIN PRIVATE KEY", as certbot
writes it, or the traditional "BEGIN RSA/EC PRIVATE KEY"), a passphrase,
and an expiry date in the past. A certificate can also come from an
intermediate CA, with a full chain file (leaf, then intermediate), as
Let's Encrypt's fullchain.pem.

Responses are read by their framing (client.read_framed_response), never
"until EOF": a TLS peer may end a connection without a close_notify.
"""

import datetime
import hashlib
import socket
import ssl
import threading

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from client import READ_TIMEOUT, Conn, Reader, connect, read_framed_response, request_bytes
from netutil import LOOPBACK

# Certificates valid from a day ago (clocks) to a year from now; an expired
# one ended well in the past.
VALID_FROM = datetime.timedelta(days=1)
VALID_FOR = datetime.timedelta(days=365)
EXPIRED_AT = datetime.datetime(2021, 1, 1)


def fingerprint(der):
    """The SHA-256 fingerprint of a DER certificate, in hex."""
    return hashlib.sha256(der).hexdigest()


class IssuedCert:
    """One certificate as written to disk: `cert` (the PEM file rsp loads:
    the leaf, then the chain if any), `key` (the private key's PEM file),
    `names` (its subjectAltName DNS names), `der` (the leaf, DER),
    `serial` and `fingerprint` (SHA-256 of the DER, hex), `not_after`."""

    def __init__(self, cert_path, key_path, names, certificate, key):
        self.cert = str(cert_path)
        self.key = str(key_path)
        self.names = list(names)
        self.certificate = certificate
        self.private_key = key
        self.der = certificate.public_bytes(serialization.Encoding.DER)
        self.serial = certificate.serial_number
        self.fingerprint = fingerprint(self.der)
        self.not_after = certificate.not_valid_after

    def entry(self):
        """{"cert": ..., "key": ...}: this certificate in tls.certificates."""
        return {"cert": self.cert, "key": self.key}

    def write_over(self, other):
        """Writes this certificate and key over `other`'s files, in place
        (same paths, same inodes), the way a renewal rewrites them."""
        for source, target in ((self.cert, other.cert), (self.key, other.key)):
            with open(source, "rb") as f:
                data = f.read()
            with open(target, "r+b") as f:
                f.truncate(0)
                f.write(data)

    def __repr__(self):
        return f"<IssuedCert {self.names} serial {self.serial:x} sha256 {self.fingerprint[:16]}...>"


def _new_key(key_type):
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"key_type is 'rsa' or 'ec', not {key_type!r}")


def _key_pem(key, key_format, passphrase):
    """The private key in PEM: key_format "pkcs8" (BEGIN PRIVATE KEY) or
    "traditional" (BEGIN RSA PRIVATE KEY / BEGIN EC PRIVATE KEY),
    encrypted with `passphrase` (bytes) if given."""
    formats = {"pkcs8": serialization.PrivateFormat.PKCS8,
               "traditional": serialization.PrivateFormat.TraditionalOpenSSL}
    encryption = (serialization.BestAvailableEncryption(passphrase) if passphrase
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, formats[key_format], encryption)


class ThrowawayCA:
    """A throwaway certificate authority (trustme.CA) and the certificates
    it issues. `intermediate()` gives a child CA whose certificates are
    written with a full chain."""

    def __init__(self, ca=None, parent=None):
        self.ca = ca if ca is not None else trustme.CA()
        self.parent = parent
        self._key = serialization.load_pem_private_key(self.ca.private_key_pem.bytes(), password=None)
        self._cert = x509.load_pem_x509_certificate(self.ca.cert_pem.bytes())

    @property
    def root(self):
        return self.parent.root if self.parent is not None else self

    @property
    def cert_pem(self):
        """This CA's own certificate, PEM bytes."""
        return self.ca.cert_pem.bytes()

    def intermediate(self):
        """A CA signed by this one: its leaves' files hold leaf + intermediate."""
        return ThrowawayCA(self.ca.create_child_ca(), parent=self)

    def chain_pems(self):
        """The PEM certificates between a leaf of this CA and the root,
        leaf side first (empty for the root itself)."""
        if self.parent is None:
            return []
        return [self.cert_pem] + self.parent.chain_pems()

    def issue(self, directory, stem, names, key_type="rsa", key_format="pkcs8", not_after=None,
              passphrase=None, common_name=None):
        """Issues a server certificate for `names` (DNS names, wildcards
        allowed) and writes DIRECTORY/STEM.pem (the leaf, then the
        intermediates if this CA is one) and DIRECTORY/STEM.key. Returns
        an IssuedCert."""
        key = _new_key(key_type)
        now = datetime.datetime.utcnow()
        not_before = now - VALID_FROM
        if not_after is None:
            not_after = now + VALID_FOR
        if not_after <= not_before:
            not_before = not_after - VALID_FOR
        subject_cn = common_name or (names[0] if names else stem)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rsp fts"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=(key_type == "rsa"),
                                         content_commitment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                           critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                                            critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        directory = str(directory)
        cert_path = f"{directory}/{stem}.pem"
        key_path = f"{directory}/{stem}.key"
        with open(cert_path, "wb") as f:
            f.write(certificate.public_bytes(serialization.Encoding.PEM))
            for pem in self.chain_pems():
                f.write(pem)
        with open(key_path, "wb") as f:
            f.write(_key_pem(key, key_format, passphrase))
        return IssuedCert(cert_path, key_path, names, certificate, key)

    def write_pem(self, path):
        """Writes the root's certificate to `path` (for tools: certbot's
        REQUESTS_CA_BUNDLE, openssl -CAfile)."""
        with open(path, "wb") as f:
            f.write(self.root.cert_pem)
        return str(path)

    def client_context(self, minimum=None, maximum=None, alpn=None, check_hostname=True, verify=True):
        """An ssl.SSLContext for a client that trusts this CA's root (and
        nothing else): minimum/maximum (ssl.TLSVersion) bound the
        versions it offers, alpn is the list of protocols it offers.
        check_hostname=False still verifies the chain (SNI can then be
        any name, or none); verify=False accepts any certificate (an
        expired one)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.root.ca.configure_trust(ctx)
        if not check_hostname or not verify:
            ctx.check_hostname = False
        if not verify:
            ctx.verify_mode = ssl.CERT_NONE
        if minimum is not None:
            ctx.minimum_version = minimum
        if maximum is not None:
            ctx.maximum_version = maximum
        if alpn is not None:
            ctx.set_alpn_protocols(alpn)
        return ctx


_session_ca = None
_session_lock = threading.Lock()


def session_ca():
    """The test session's CA (made on first use)."""
    global _session_ca
    with _session_lock:
        if _session_ca is None:
            _session_ca = ThrowawayCA()
        return _session_ca



def old_protocol_context(version):
    """A client context that offers only `version` (ssl.TLSVersion.TLSv1 or
    TLSv1_1), at security level 0 so that OpenSSL 3 lets it (and accepts
    any certificate: the point is the protocol)."""
    import warnings
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = version
        ctx.maximum_version = version
    return ctx


# -- clients --------------------------------------------------------------------------


def tls_connect(port, context, server_name=None, session=None, timeout=READ_TIMEOUT, address=LOOPBACK,
                rcvbuf=None, suppress_ragged_eofs=True):
    """A TLS connection to address:port, handshake done. server_name is
    sent as SNI (None or an IP address: no SNI; the context must then not
    check the host name); session resumes a session of an earlier
    connection (SSLSocket.session)."""
    raw = connect(port, rcvbuf=rcvbuf, timeout=timeout, address=address)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        return context.wrap_socket(raw, server_hostname=server_name, session=session,
                                   suppress_ragged_eofs=suppress_ragged_eofs)
    except BaseException:
        raw.close()
        raise


def describe_tls(sock, response):
    """Adds what the handshake gave to `response` (a client.Response):
    peer_der, peer_cert (x509), peer_fingerprint, tls_version, alpn,
    session_reused, cipher."""
    der = sock.getpeercert(binary_form=True)
    response.peer_der = der
    response.peer_cert = x509.load_der_x509_certificate(der) if der else None
    response.peer_fingerprint = fingerprint(der) if der else None
    response.tls_version = sock.version()
    response.alpn = sock.selected_alpn_protocol()
    response.session_reused = sock.session_reused
    response.cipher = sock.cipher()
    return response


def cert_names(cert):
    """The subjectAltName DNS names of an x509 certificate."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return san.get_values_for_type(x509.DNSName)


class TLSConn(Conn):
    """A persistent HTTPS connection (see client.Conn: request, get, send,
    read_response, state, closed, is_open) to 127.0.0.1:port with SNI
    `server_name`. Requests carry Host: server_name (or `host`). The
    handshake's outcome: tls_version, alpn, session_reused, session,
    peer_fingerprint, peer_cert."""

    def __init__(self, port, context, server_name=None, host=None, session=None, timeout=READ_TIMEOUT,
                 rcvbuf=None, suppress_ragged_eofs=True):
        self.port = port
        self.host = host or server_name or f"{LOOPBACK}:{port}"
        self.sock = tls_connect(port, context, server_name, session=session, timeout=timeout, rcvbuf=rcvbuf,
                                suppress_ragged_eofs=suppress_ragged_eofs)
        self.reader = Reader(self.sock)
        der = self.sock.getpeercert(binary_form=True)
        self.peer_der = der
        self.peer_cert = x509.load_der_x509_certificate(der) if der else None
        self.peer_fingerprint = fingerprint(der) if der else None
        self.tls_version = self.sock.version()
        self.alpn = self.sock.selected_alpn_protocol()
        self.session_reused = self.sock.session_reused

    @property
    def session(self):
        """The TLS session to resume later (with TLS 1.3 it comes with a
        ticket after the handshake: read a response first)."""
        return self.sock.session


def https_request(port, path="/", context=None, server_name=None, method="GET", headers=(), body=b"",
                  host=None, session=None, timeout=READ_TIMEOUT, version="1.1"):
    """One request on a new TLS connection (SNI server_name; Host: `host`,
    else server_name, else 127.0.0.1:PORT; `Connection: close` added),
    its response read by its framing: a client.Response (status, headers,
    header(), body, json()) with the handshake's outcome added (see
    describe_tls) and `session` (to resume). Large bodies are fine."""
    headers = list(headers) + [("Connection", "close")]
    sock = tls_connect(port, context, server_name, session=session, timeout=timeout)
    with sock:
        sock.sendall(request_bytes(method, path, headers, body, version,
                                   host or server_name or f"{LOOPBACK}:{port}"))
        r = read_framed_response(Reader(sock), head=(method == "HEAD"))
        describe_tls(sock, r)
        r.session = sock.session
    return r


def https_get(port, path="/", context=None, server_name=None, **options):
    return https_request(port, path, context, server_name, **options)


def handshake_only(port, context, server_name=None, session=None, timeout=READ_TIMEOUT):
    """Connects and handshakes, then closes: a Response-like record of the
    handshake (see describe_tls), without a request."""
    from client import Response
    with tls_connect(port, context, server_name, session=session, timeout=timeout) as sock:
        return describe_tls(sock, Response(b""))


def client_hello(server_name="www.example.test"):
    """The bytes of a real TLS ClientHello (what a client sends first),
    made with a memory BIO: for clients that stop in the middle of a
    handshake. Returns (hello bytes, (sslobj, incoming, outgoing)) so that
    a test can feed the server's answer back and go on."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=server_name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read(), (obj, incoming, outgoing)
