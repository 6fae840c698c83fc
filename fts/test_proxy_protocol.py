"""The PROXY protocol on a listener (stage 22): listen = { address = ...,
proxy_protocol = true } (and tls.listen the same). A load balancer's
header, v1 or v2, is read before anything else (before TLS on the HTTPS
listener); the address it carries is the client for the backend
(X-Forwarded-For, X-Real-IP, Forwarded), for route (req.client) and in the
access log. A connection without a valid header within header_timeout is
closed without an answer and reaches no backend; with trusted_proxies, a
peer outside it is refused. The spec: notes of issue 31 and chapter 22."""

import json
import socket
import ssl
import struct

import pytest

from client import READ_TIMEOUT, connect
from netutil import free_port, wait_until_listening
from test_access_log import wait_lines
from tlsutil import session_ca

LOOPBACK = "127.0.0.1"
SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(command, family=None, source=None, port=0):
    """A v2 header: LOCAL (command 0) or PROXY (1) with source:port."""
    if family is None:
        return SIG + bytes([0x20 | command, 0]) + struct.pack("!H", 0)
    if family == socket.AF_INET:
        payload = socket.inet_pton(family, source) + socket.inet_pton(family, "192.0.2.99")
        fam = 0x11
    else:
        payload = socket.inet_pton(family, source) + socket.inet_pton(family, "2001:db8::99")
        fam = 0x21
    payload += struct.pack("!HH", port, 443)
    return SIG + bytes([0x20 | command, fam]) + struct.pack("!H", len(payload)) + payload


def read_all(sock):
    """Everything until EOF (or a reset: b"" then)."""
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def send_then_read(port, data, source=None):
    """Sends data on a new connection, half-closes nothing, reads to EOF."""
    with connect(port, source=source) as sock:
        sock.sendall(data)
        return read_all(sock)


def echo_request(path="/echo", extra=b""):
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n" + extra + b"\r\n"


def headers_of(raw):
    """{lowercase name: [values]} of what /echo received, from the raw
    response (a whole one, closed after)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), f"not a 200: {raw[:300]!r}"
    found = {}
    for name, value in json.loads(body)["headers"]:
        found.setdefault(name.lower(), []).append(value)
    return found


def start(start_proxy, tmp_path, backend, extra="", tls=None):
    """rsp with listen = { address = 127.0.0.1:PORT, proxy_protocol = true },
    header_timeout 0.5 s, an access log, and `extra` Lua."""
    port = free_port()
    log = tmp_path / "access.log"
    text = (f'listen = {{ address = "{LOOPBACK}:{port}", proxy_protocol = true }}\n'
            f'backends = {{ "{backend.host}:{backend.port}" }}\n'
            f'header_timeout = 0.5\naccess_log = "{log}"\n{extra}\n')
    if tls is not None:
        text += (f'tls = {{ listen = {{ address = "{LOOPBACK}:{tls["port"]}", proxy_protocol = true }}, '
                 f'certificates = {{ {{ cert = "{tls["cert"]}", key = "{tls["key"]}" }} }} }}\n')
    path = tmp_path / "pp.lua"
    path.write_text(text)
    proxy = start_proxy(args=[str(path)], port=port)
    proxy.log = log
    return proxy


CASES = [
    ("v1 TCP4", b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 80\r\n", "192.0.2.1"),
    ("v1 TCP6", b"PROXY TCP6 2001:db8::1 2001:db8::2 56324 80\r\n", "2001:db8::1"),
    ("v1 UNKNOWN", b"PROXY UNKNOWN\r\n", LOOPBACK),
    ("v2 PROXY TCP4", v2(1, socket.AF_INET, "198.51.100.7", 1234), "198.51.100.7"),
    ("v2 PROXY TCP6", v2(1, socket.AF_INET6, "2001:db8::7", 1234), "2001:db8::7"),
    ("v2 LOCAL", v2(0), LOOPBACK),
]


@pytest.mark.stage(22)
@pytest.mark.parametrize("name,header,client", CASES, ids=[c[0] for c in CASES])
def test_header_address_reaches_backend_and_log(start_proxy, tmp_path, backend, name, header, client):
    """The address the header carries (the peer's own for UNKNOWN and
    LOCAL) is X-Forwarded-For, X-Real-IP and Forwarded's for= at the
    backend, and the access log's first field; the request after the
    header is served as usual."""
    proxy = start(start_proxy, tmp_path, backend)
    raw = send_then_read(proxy.port, header + echo_request())
    seen = headers_of(raw)
    assert seen["x-forwarded-for"] == [client], (name, seen)
    assert seen["x-real-ip"] == [client], (name, seen)
    expected = f'for="[{client}]"' if ":" in client else f"for={client}"
    assert seen["forwarded"][0].startswith(expected), (name, seen["forwarded"])
    lines = wait_lines(str(proxy.log), 1)
    assert lines[0].startswith(client + " "), (name, lines)


@pytest.mark.stage(22)
def test_route_sees_the_header_address(start_proxy, tmp_path, backend):
    """route's req.client is the address of the header."""
    proxy = start(start_proxy, tmp_path, backend, extra="""
function route(req)
  return { status = 200, body = "client=" .. req.client }
end""")
    raw = send_then_read(proxy.port, b"PROXY TCP4 203.0.113.9 198.51.100.2 1 80\r\n" + echo_request("/"))
    assert raw.startswith(b"HTTP/1.1 200") and raw.endswith(b"client=203.0.113.9"), raw[:300]


REFUSED = [
    ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("v2 bad signature", b"\r\n\r\n\x00\r\nQUIX\n" + bytes(20)),
    ("oversized v1", b"PROXY TCP4 " + b"1" * 200 + b"\r\n"),
    ("oversized v2", SIG + b"\x21\x11\x02\x01" + bytes(513)),
    ("v1 bad address", b"PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n" + echo_request()),
]


@pytest.mark.stage(22)
@pytest.mark.parametrize("name,data", REFUSED, ids=[c[0] for c in REFUSED])
def test_invalid_header_closed_without_answer(start_proxy, tmp_path, backend, name, data):
    """Bytes that are not a valid header: closed at once, no answer, no
    request at the backend, one proxy_protocol line in the error log."""
    proxy = start(start_proxy, tmp_path, backend)
    assert send_then_read(proxy.port, data) == b"", name
    assert not backend.hits, (name, dict(backend.hits))
    assert "proxy_protocol: 127.0.0.1: " in proxy.stderr(), proxy.stderr()[-2000:]


@pytest.mark.stage(22)
def test_truncated_header_closed_by_header_timeout(start_proxy, tmp_path, backend):
    """Half a header and then silence: closed when header_timeout (0.5 s)
    passes, without an answer."""
    proxy = start(start_proxy, tmp_path, backend)
    assert send_then_read(proxy.port, b"PROXY TCP4 192.0.2.1 198.51") == b""
    assert not backend.hits
    assert "no whole header within header_timeout" in proxy.stderr(), proxy.stderr()[-2000:]


@pytest.mark.stage(22)
def test_valid_header_then_bad_request(start_proxy, tmp_path, backend):
    """After a valid header the stream is HTTP as usual: a bad request gets
    rsp's 400, logged with the header's address."""
    proxy = start(start_proxy, tmp_path, backend)
    raw = send_then_read(proxy.port, b"PROXY TCP4 192.0.2.44 198.51.100.2 1 80\r\nGARBAGE\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 400"), raw[:200]
    assert not backend.hits
    lines = wait_lines(str(proxy.log), 1)
    assert lines[0].startswith("192.0.2.44 "), lines


@pytest.mark.stage(22)
def test_peer_outside_trusted_proxies_refused(start_proxy, tmp_path, backend):
    """With trusted_proxies set, a peer outside it is closed unanswered
    even with a valid header; a peer inside it is served."""
    proxy = start(start_proxy, tmp_path, backend, extra='trusted_proxies = { "127.0.0.2/32" }')
    header = b"PROXY TCP4 192.0.2.1 198.51.100.2 1 80\r\n"
    assert send_then_read(proxy.port, header + echo_request(), source="127.0.0.1") == b""
    assert "proxy_protocol: 127.0.0.1: not in trusted_proxies" in proxy.stderr(), proxy.stderr()[-2000:]
    seen = headers_of(send_then_read(proxy.port, header + echo_request(), source="127.0.0.2"))
    assert seen["x-real-ip"] == ["192.0.2.1"], seen


XFF_CASES = [
    # (name, peer, X-Forwarded-For sent, client believed, X-Forwarded-For passed on)
    ("right-most untrusted", "10.0.0.5", [b"203.0.113.1, 10.0.0.9"], "203.0.113.1",
     "203.0.113.1, 10.0.0.9, 10.0.0.5"),
    ("two headers read as one list", "10.0.0.5", [b"198.51.100.1", b"203.0.113.2 ,10.0.0.9"], "203.0.113.2",
     "198.51.100.1, 203.0.113.2 ,10.0.0.9, 10.0.0.5"),
    ("all trusted: the left-most", "10.0.0.5", [b"10.0.0.1, 10.0.0.2"], "10.0.0.1",
     "10.0.0.1, 10.0.0.2, 10.0.0.5"),
    ("malformed: the peer", "10.0.0.5", [b"203.0.113.1, bogus"], "10.0.0.5", "203.0.113.1, bogus, 10.0.0.5"),
    ("none: the peer", "10.0.0.5", [], "10.0.0.5", "10.0.0.5"),
    ("untrusted peer: not believed, replaced", "192.0.2.1", [b"203.0.113.1"], "192.0.2.1", "192.0.2.1"),
]


@pytest.mark.stage(22)
@pytest.mark.parametrize("name,peer,xff,client,passed_on", XFF_CASES, ids=[c[0] for c in XFF_CASES])
def test_trusted_proxies_x_forwarded_for(start_proxy, tmp_path, backend, name, peer, xff, client, passed_on):
    """When the client (here the PROXY header's address) is in
    trusted_proxies, the client becomes the right-most X-Forwarded-For
    address not in it (all in it: the left-most; malformed: the peer stays):
    X-Real-IP, Forwarded's for= and the access log say so. The backend's
    X-Forwarded-For is the chain plus the peer, the hop rsp saw; a chain
    from a peer outside trusted_proxies is replaced by the peer alone."""
    proxy = start(start_proxy, tmp_path, backend, extra='trusted_proxies = { "127.0.0.1/32", "10.0.0.0/8" }')
    extra = b"".join(b"X-Forwarded-For: " + v + b"\r\n" for v in xff)
    header = f"PROXY TCP4 {peer} 198.51.100.2 1 80\r\n".encode()
    seen = headers_of(send_then_read(proxy.port, header + echo_request(extra=extra)))
    assert seen["x-real-ip"] == [client], (name, seen)
    assert seen["x-forwarded-for"] == [passed_on], (name, seen)
    assert seen["forwarded"][0].startswith(f"for={client};"), (name, seen)
    lines = wait_lines(str(proxy.log), 1)
    assert lines[0].startswith(client + " "), (name, lines)


@pytest.mark.stage(22)
def test_without_trusted_proxies_chain_kept(start_proxy, tmp_path, backend):
    """Without trusted_proxies rsp believes no X-Forwarded-For but passes
    the chain on with the peer added, as every stage before did."""
    proxy = start(start_proxy, tmp_path, backend)
    header = b"PROXY TCP4 192.0.2.1 198.51.100.2 1 80\r\n"
    seen = headers_of(send_then_read(proxy.port, header + echo_request(extra=b"X-Forwarded-For: 203.0.113.1\r\n")))
    assert seen["x-real-ip"] == ["192.0.2.1"], seen
    assert seen["x-forwarded-for"] == ["203.0.113.1, 192.0.2.1"], seen


@pytest.mark.stage(22)
@pytest.mark.parametrize("header,client", [(b"PROXY TCP4 192.0.2.5 198.51.100.2 1 443\r\n", "192.0.2.5"),
                                           (v2(1, socket.AF_INET6, "2001:db8::5", 9), "2001:db8::5"),
                                           (v2(0), LOOPBACK)], ids=["v1", "v2", "v2 LOCAL"])
def test_tls_listener_reads_header_before_handshake(start_proxy, tmp_path, backend, header, client):
    """On tls.listen with proxy_protocol the header comes before the
    ClientHello; the handshake and request then proceed, and the backend
    sees the header's address."""
    ca = session_ca()
    cert = ca.issue(tmp_path, "www", ["www.example.test"])
    tls_port = free_port()
    proxy = start(start_proxy, tmp_path, backend, tls={"port": tls_port, "cert": cert.cert, "key": cert.key})
    wait_until_listening(tls_port, proxy.process, 10, what="rsp's TLS listener")
    sock = socket.create_connection((LOOPBACK, tls_port), timeout=READ_TIMEOUT)
    sock.sendall(header)
    with ca.client_context().wrap_socket(sock, server_hostname="www.example.test") as tls:
        tls.sendall(echo_request())
        raw = b""
        try:
            while chunk := tls.recv(65536):
                raw += chunk
        except ssl.SSLError:
            pass
    assert headers_of(raw)["x-real-ip"] == [client]


def h2_after_header(monkeypatch, port, context, header):
    """An h2client.H2Client to 127.0.0.1:port that sends `header` (the
    PROXY header) on the TCP connection before its ClientHello: H2Client
    makes its socket with h2client.tls_connect, replaced here for the
    test."""
    h2client = pytest.importorskip("h2client", reason="python3-h2 is not installed")

    def connect_after_header(port, context, server_name=None, timeout=READ_TIMEOUT, rcvbuf=None):
        sock = connect(port, timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(header)
            return context.wrap_socket(sock, server_hostname=server_name)
        except BaseException:
            sock.close()
            raise

    monkeypatch.setattr(h2client, "tls_connect", connect_after_header)
    return h2client.H2Client(port, context, "www.example.test")


@pytest.mark.stage(22)
@pytest.mark.parametrize("header,client", [(b"PROXY TCP4 192.0.2.44 198.51.100.2 5000 443\r\n", "192.0.2.44"),
                                           (v2(1, socket.AF_INET, "198.51.100.45", 5001), "198.51.100.45"),
                                           (v2(1, socket.AF_INET6, "2001:db8::46", 5002), "2001:db8::46")],
                         ids=["v1", "v2", "v2 TCP6"])
def test_http2_behind_the_header(start_proxy, tmp_path, backend, monkeypatch, header, client):
    """HTTP/2 (ALPN h2) on a tls.listen with proxy_protocol: the header,
    then TLS, then two streams on the one connection; the backend sees the
    header's address in X-Real-IP and X-Forwarded-For for both, and both
    access log lines begin with it."""
    pytest.importorskip("h2", reason="python3-h2 is not installed")
    from h2client import h2_context
    ca = session_ca()
    cert = ca.issue(tmp_path, "www", ["www.example.test"])
    tls_port = free_port()
    proxy = start(start_proxy, tmp_path, backend, tls={"port": tls_port, "cert": cert.cert, "key": cert.key})
    wait_until_listening(tls_port, proxy.process, 10, what="rsp's TLS listener")
    with h2_after_header(monkeypatch, tls_port, h2_context(ca), header) as c:
        assert c.alpn == "h2"
        streams = [c.request("GET", "/echo"), c.request("GET", "/echo?second")]
        c.wait_all(streams)
        for sid in streams:
            s = c.streams[sid]
            assert s.status == 200, c.describe()
            seen = {}
            for name, value in s.json()["headers"]:
                seen.setdefault(name.lower(), []).append(value)
            assert seen["x-real-ip"] == [client], (sid, seen)
            assert seen["x-forwarded-for"] == [client], (sid, seen)
    lines = wait_lines(str(proxy.log), 2)
    assert all(line.startswith(client + " ") for line in lines), lines
