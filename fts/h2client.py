"""HTTP/2 clients for the tests (stage 20): TLS with ALPN h2 over raw
sockets, two ways.

    ctx = h2_context(ca)                          # offers h2, then http/1.1
    with H2Client(port, ctx, "www.example.test") as c:   # h2's H2Connection
        s = c.request("GET", "/cl?size=10")       # a stream id
        c.wait_ended(s)
        c.streams[s].status, c.streams[s].header("x-backend"), c.streams[s].body
    with RawH2(port, ctx, "www.example.test") as r:      # frame by frame
        r.send(r.headers_frames(1, GET_HEADERS, end_stream=True))
        got = r.collect([1])                      # {1: RawStream}
        r.until_closed()                          # GOAWAYs seen, how it ended

H2Client drives python3-h2's H2Connection (Debian's h2 4.1): settings,
flow control, HPACK and the stream states are h2's; its outbound header
checks are off, so a test can send what a broken or hostile client sends
(uppercase names, connection-specific fields, CR/LF/NUL, a Content-Length
the DATA disagrees with). Inbound, h2 checks what rsp sends: a response
with a connection-specific field, or a frame out of order, fails the test
with h2's ProtocolError. Data of a stream is acknowledged (WINDOW_UPDATE)
as it arrives unless the stream is paused: the client then stops reading
that stream and its window closes, while other streams go on.

RawH2 writes frames itself (hyperframe's classes, or frame() for frames
hyperframe refuses to build, such as a WINDOW_UPDATE of 0) with an HPACK
encoder of its own, and reads every frame rsp sends with hyperframe,
decoding header blocks (HEADERS + CONTINUATION) in order: for malformed
requests and floods, where H2Connection's state machine would refuse to
send or to read. It answers rsp's SETTINGS and PINGs and opens windows for
what it reads only inside collect(); a flood is sent by flood(), which
stops as soon as rsp ends the connection.

Every wait is bounded (READ_TIMEOUT, or the timeout given); nothing here
sleeps.
"""

import json
import select
import socket
import ssl
import struct
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack
from hpack.hpack import encode_integer
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame)

from client import READ_TIMEOUT
from tlsutil import tls_connect

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Error codes (RFC 9113 section 7).
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
SETTINGS_TIMEOUT = 0x4
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
CONNECT_ERROR = 0xA
ENHANCE_YOUR_CALM = 0xB
INADEQUATE_SECURITY = 0xC
HTTP_1_1_REQUIRED = 0xD
ERROR_NAMES = {
    0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR", 0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT", 0x5: "STREAM_CLOSED", 0x6: "FRAME_SIZE_ERROR", 0x7: "REFUSED_STREAM",
    0x8: "CANCEL", 0x9: "COMPRESSION_ERROR", 0xA: "CONNECT_ERROR", 0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY", 0xD: "HTTP_1_1_REQUIRED",
}

# Frame types and flags (RFC 9113 section 6), for frame().
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4

# Settings identifiers (RFC 9113 section 6.5.2).
HEADER_TABLE_SIZE = 0x1
ENABLE_PUSH = 0x2
MAX_CONCURRENT_STREAMS = 0x3
INITIAL_WINDOW_SIZE = 0x4
MAX_FRAME_SIZE = 0x5
MAX_HEADER_LIST_SIZE = 0x6

DEFAULT_MAX_FRAME = 16384   # every peer accepts frames this large (RFC 9113 section 4.2)
BIG_WINDOW = 1 << 30        # what a client that wants everything opens its connection window by


def error_name(code):
    return ERROR_NAMES.get(code, f"0x{code:x}")


def h2_context(ca, alpn=("h2", "http/1.1")):
    """A client context trusting the test CA that offers `alpn`."""
    return ca.client_context(alpn=list(alpn))


def as_bytes(value):
    return value if isinstance(value, bytes) else str(value).encode("latin-1")


def header_list(headers):
    """[(bytes, bytes)] from (name, value) pairs of str or bytes."""
    return [(as_bytes(n), as_bytes(v)) for n, v in headers]


def request_headers(method, path, authority, scheme="https", extra=()):
    """The pseudo-header fields of a request, then `extra`, as bytes pairs
    (authority None: no :authority)."""
    fields = [(":method", method), (":scheme", scheme), (":path", path)]
    if authority is not None:
        fields.append((":authority", authority))
    return header_list(fields + list(extra))


def frame(kind, flags, stream_id, payload=b""):
    """One frame's bytes, built by hand (for frames hyperframe will not
    build: a WINDOW_UPDATE of 0, a frame on the wrong stream)."""
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def hpack_literal(name, value, indexing=False):
    """One header field as an HPACK literal with a new name (no Huffman
    coding), built by hand: never indexed (0x10), or with incremental
    indexing (0x40: it enters the decoder's dynamic table). Blocks made of
    these and static-table references need no encoder state."""
    name, value = as_bytes(name), as_bytes(value)
    return (bytes([0x40 if indexing else 0x10]) + bytes(encode_integer(len(name), 7)) + name
            + bytes(encode_integer(len(value), 7)) + value)


def hpack_indexed(index):
    """An HPACK indexed field: entry `index` of the static table (1-61)
    or of the dynamic table (62 and up: 62 is the newest entry)."""
    head = encode_integer(index, 7)
    head[0] |= 0x80
    return bytes(head)


def static_request_block(authority, method=b"GET", path=b"/"):
    """The pseudo-header fields of an https request made of static-table
    references and never-indexed literals only (no encoder state): for
    blocks built by hand next to entries a test puts in the table itself."""
    known = {b"GET": 0x82, b"POST": 0x83}
    head = bytes([known[method]]) if method in known else hpack_literal(":method", method)
    head += bytes([0x87])  # :scheme https
    head += bytes([0x84]) if path == b"/" else hpack_literal(":path", path)
    return head + hpack_literal(":authority", authority)


def settings_payload(settings):
    return b"".join(struct.pack(">HI", k, v) for k, v in dict(settings).items())


class _Ended(Exception):
    """The connection ended (EOF or reset) while reading."""


def _recv(sock, size=65536):
    """One read: bytes, b"" at EOF; a reset (or a TLS record cut short) is
    reported as _Ended("reset"). socket.timeout passes through."""
    try:
        data = sock.recv(size)
    except (ConnectionResetError, BrokenPipeError):
        raise _Ended("reset") from None
    except ssl.SSLZeroReturnError:
        return b""
    except ssl.SSLError as e:
        if "UNEXPECTED_EOF" in str(e) or "EOF occurred" in str(e):
            return b""
        raise _Ended(f"TLS error: {e}") from None
    return data


def _readable(sock, timeout):
    """True if a read would not block for long: decrypted bytes wait in
    the TLS layer, or the socket has something within `timeout` s."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    readable, _, _ = select.select([sock], [], [], max(timeout, 0))
    return bool(readable)


# -- H2Client: h2's H2Connection -----------------------------------------------------------


class Stream:
    """What one stream of an H2Client got: status, headers ([(bytes,
    bytes)], the final response's), informational (1xx heads), body
    (bytes), trailers, ended (END_STREAM came), reset (the RST_STREAM error
    code rsp sent, or None), and `order`, the client's event counter when it
    ended or was reset (which of two streams finished first)."""

    def __init__(self, stream_id):
        self.id = stream_id
        self.status = None
        self.headers = []
        self.informational = []
        self.trailers = []
        self.data = bytearray()
        self.ended = False
        self.reset = None
        self.order = None
        self.unacknowledged = 0  # bytes of a paused stream not yet given back as window

    @property
    def body(self):
        return bytes(self.data)

    @property
    def done(self):
        return self.ended or self.reset is not None

    def header(self, name):
        """The last value of field `name` (str, lowercase) as str, or None."""
        values = self.header_values(name)
        return values[-1] if values else None

    def header_values(self, name):
        wanted = as_bytes(name)
        return [v.decode("latin-1") for n, v in self.headers if n == wanted]

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        reset = f" reset {error_name(self.reset)}" if self.reset is not None else ""
        return (f"<stream {self.id}: status {self.status}, {len(self.data)} body bytes, "
                f"{'ended' if self.ended else 'open'}{reset}>")


class H2Client:
    """An HTTP/2 connection to 127.0.0.1:port over TLS (SNI server_name),
    driven by h2's H2Connection. The constructor checks that ALPN chose h2,
    sends the preface and `settings` ({h2.settings.SettingCodes or int:
    value}), opens the connection window by `connection_window` more bytes
    (BIG_WINDOW by default: the per-stream windows are then what limits
    rsp), and waits for rsp's SETTINGS (in server_settings, {int: value}).

    request() opens a stream (its body, if any, is sent as the windows
    allow, while waiting); wait(), wait_ended() and wait_all() read until a
    condition holds (bounded); pause(stream) stops giving its data back as
    window, resume(stream) gives it all back. goaways lists the GOAWAYs
    received: (error code, last stream id, debug data); closed says how
    the connection ended ("eof", "reset" or None while open)."""

    def __init__(self, port, context, server_name, settings=None, connection_window=BIG_WINDOW,
                 timeout=READ_TIMEOUT, rcvbuf=None, authority=None):
        self.authority = authority or server_name
        self.timeout = timeout
        self.sock = tls_connect(port, context, server_name, timeout=timeout, rcvbuf=rcvbuf)
        self.alpn = self.sock.selected_alpn_protocol()
        if self.alpn != "h2":
            self.sock.close()
            raise AssertionError(f"ALPN selected {self.alpn!r}, not h2")
        config = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                           validate_outbound_headers=False,
                                           normalize_outbound_headers=False,
                                           validate_inbound_headers=True)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(dict(settings))
        if connection_window:
            self.conn.increment_flow_control_window(connection_window)
        self.streams = {}
        self.goaways = []
        self.server_settings = {}
        self.settings_received = False
        self.closed = None
        self.write_failed = None
        self.events = 0
        self.paused = set()
        self._pending = {}  # stream id -> memoryview of the body still to send
        try:
            self.flush()
            self.wait(lambda: self.settings_received, "rsp's SETTINGS frame")
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # -- sending -------------------------------------------------------------------------

    def flush(self):
        """Sends what h2 has queued."""
        data = self.conn.data_to_send()
        if data and self.closed is None and self.write_failed is None:
            try:
                self.sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError) as e:
                self.write_failed = repr(e)  # rsp closed: what it sent before is still read
            except socket.timeout:
                raise AssertionError(f"rsp stopped reading the connection: {len(data)} bytes the windows allowed "
                                     f"were not taken in {self.timeout} s; {self.describe()}") from None

    def request(self, method="GET", path="/", headers=(), body=None, authority=None, scheme="https",
                fields=None, end_stream=True):
        """Opens a stream for a request (pseudo-header fields from method,
        path, authority (the client's by default) and scheme, then
        `headers`; or exactly `fields`, a list of (name, value), when
        given) and returns its id. A body (bytes) is sent as DATA as the
        windows allow, END_STREAM with its last byte; None: no body, END_STREAM
        on the HEADERS frame. end_stream=False leaves the stream open after
        either, for send_data()."""
        sid = self.conn.get_next_available_stream_id()
        self.streams[sid] = Stream(sid)
        if fields is None:
            fields = request_headers(method, path, authority or self.authority, scheme, headers)
        self.conn.send_headers(sid, header_list(fields), end_stream=body is None and end_stream)
        if body is not None:
            self._pending[sid] = [memoryview(body), end_stream]
            self._send_pending()
        self.flush()
        return sid

    def send_data(self, sid, data, end_stream=False):
        """Queues more body for stream `sid` (sent as the windows allow);
        end_stream ends the stream after it."""
        if sid in self._pending:
            self._pending[sid] = [memoryview(bytes(self._pending[sid][0]) + data), end_stream]
        else:
            self._pending[sid] = [memoryview(data), end_stream]
        self._send_pending()
        self.flush()

    def _send_pending(self):
        """Sends as much of every pending body as the windows allow."""
        for sid, item in list(self._pending.items()):
            left, end = item
            ended = False
            try:
                while len(left):
                    size = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size,
                               len(left))
                    if size <= 0:
                        break
                    chunk, left = left[:size], left[size:]
                    ended = end and not len(left)
                    self.conn.send_data(sid, bytes(chunk), end_stream=ended)
                if len(left):
                    item[0] = left
                    continue
                if end and not ended:
                    self.conn.end_stream(sid)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pass  # rsp reset the stream, or the connection is going: nothing more to send
            del self._pending[sid]

    def unsent(self, sid):
        """How many bytes of stream `sid`'s body wait for window."""
        item = self._pending.get(sid)
        return len(item[0]) if item is not None else 0

    def reset(self, sid, code=CANCEL):
        self.conn.reset_stream(sid, error_code=code)
        self._pending.pop(sid, None)
        self.flush()

    def ping(self, data=b"12345678"):
        self.conn.ping(data)
        self.flush()

    # -- reading -------------------------------------------------------------------------

    def pause(self, sid):
        """Stops acknowledging stream `sid`'s data: its window closes."""
        self.paused.add(sid)

    def resume(self, sid):
        """Acknowledges everything stream `sid` got and reads on."""
        self.paused.discard(sid)
        st = self.streams[sid]
        if st.unacknowledged and not st.done:
            self.conn.acknowledge_received_data(st.unacknowledged, sid)
        st.unacknowledged = 0
        self.flush()

    def read_once(self, timeout):
        """Reads what arrives within `timeout` s (at most one recv) and
        handles it. False once the connection has ended."""
        if self.closed is not None:
            return False
        if not _readable(self.sock, timeout):
            return True
        try:
            data = _recv(self.sock)
        except _Ended as e:
            self.closed = str(e)
            return False
        if not data:
            self.closed = "eof"
            return False
        for event in self.conn.receive_data(data):
            self._handle(event)
        self._send_pending()
        self.flush()
        return True

    def _handle(self, event):
        self.events += 1
        sid = getattr(event, "stream_id", None)
        st = self.streams.get(sid) if sid else None
        if isinstance(event, h2.events.ResponseReceived) and st is not None:
            st.headers = list(event.headers)
            st.status = int(dict(event.headers)[b":status"])
        elif isinstance(event, h2.events.InformationalResponseReceived) and st is not None:
            st.informational.append(list(event.headers))
        elif isinstance(event, h2.events.TrailersReceived) and st is not None:
            st.trailers = list(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            if st is not None:
                st.data += event.data
            if st is not None and sid in self.paused:
                st.unacknowledged += event.flow_controlled_length
            elif event.flow_controlled_length:
                try:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, sid)
                except h2.exceptions.StreamClosedError:
                    pass
        elif isinstance(event, h2.events.StreamEnded) and st is not None:
            st.ended = True
            st.order = self.events
        elif isinstance(event, h2.events.StreamReset) and st is not None:
            st.reset = event.error_code
            st.order = self.events
            self._pending.pop(sid, None)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaways.append((event.error_code, event.last_stream_id, event.additional_data))
            if event.error_code == NO_ERROR:
                # h2 4.1 closes its state machine on any GOAWAY, though a
                # graceful one lets the streams up to its last stream id
                # finish (RFC 9113 section 6.8): back to open, to read them.
                self.conn.state_machine.state = h2.connection.ConnectionState.CLIENT_OPEN
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            for code, change in event.changed_settings.items():
                self.server_settings[int(code)] = change.new_value
            self.settings_received = True

    def wait(self, condition, what, timeout=None):
        """Reads until condition() is true; fails the test (AssertionError,
        naming `what` and the streams) if the connection ends first or
        `timeout` s (self.timeout by default) pass."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{what}: not the case after {self.timeout if timeout is None else timeout} s;"
                                     f" {self.describe()}")
            if not self.read_once(min(remaining, 0.5)) and not condition():
                raise AssertionError(f"{what}: the connection ended ({self.closed}) first; {self.describe()}")

    def wait_ended(self, sid, timeout=None):
        """Reads until stream `sid` ended or was reset; returns its Stream."""
        self.wait(lambda: self.streams[sid].done, f"stream {sid} to end", timeout)
        return self.streams[sid]

    def wait_all(self, sids, timeout=None):
        self.wait(lambda: all(self.streams[s].done for s in sids), f"streams {list(sids)} to end", timeout)
        return [self.streams[s] for s in sids]

    def wait_closed(self, timeout=None):
        """Reads (answering nothing new) until the connection ends; returns how."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while self.closed is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"the connection was still open after {timeout or self.timeout} s; "
                                     f"{self.describe()}")
            self.read_once(min(remaining, 0.5))
        return self.closed

    def get(self, path, headers=(), authority=None, timeout=None):
        """A GET on a new stream, read to its end: its Stream."""
        return self.wait_ended(self.request("GET", path, headers, authority=authority), timeout)

    def describe(self):
        goaways = [(error_name(c), last) for c, last, _ in self.goaways]
        return f"streams {list(self.streams.values())}, GOAWAYs {goaways}, closed {self.closed}"


# -- RawH2: frame by frame -----------------------------------------------------------------


class RawStream:
    """What one stream of a RawH2 got: status, headers, body, ended, reset
    (the RST_STREAM error code or None)."""

    def __init__(self, stream_id):
        self.id = stream_id
        self.status = None
        self.headers = []
        self.data = bytearray()
        self.ended = False
        self.reset = None

    @property
    def body(self):
        return bytes(self.data)

    @property
    def done(self):
        return self.ended or self.reset is not None

    def header(self, name):
        values = [v for n, v in self.headers if n == as_bytes(name)]
        return values[-1].decode("latin-1") if values else None

    def __repr__(self):
        reset = f" reset {error_name(self.reset)}" if self.reset is not None else ""
        return (f"<raw stream {self.id}: status {self.status}, {len(self.data)} body bytes, "
                f"{'ended' if self.ended else 'open'}{reset}>")


class RawH2:
    """An HTTP/2 connection written frame by frame. The constructor checks
    ALPN h2, sends the preface and a SETTINGS frame of `settings` ({id:
    value}), opens the connection window by `connection_window`, reads
    until rsp's SETTINGS (server_settings) and acknowledges them.

    encoder is this connection's HPACK encoder (every header block sent
    must go through it, in order, or be made of static-table references and
    literals without indexing only); headers_frames() makes a header block
    into HEADERS (+ CONTINUATION) frames. send() writes frames (objects or
    bytes); collect() reads until streams end; until_closed() reads until
    the connection ends; flood() sends a bounded flood and stops when rsp
    ends the connection. Every frame rsp sent is kept in `frames`;
    goaways lists (error code, last stream id)."""

    def __init__(self, port, context, server_name, settings=None, connection_window=BIG_WINDOW,
                 timeout=READ_TIMEOUT, rcvbuf=None, authority=None):
        self.authority = authority or server_name
        self.timeout = timeout
        self.sock = tls_connect(port, context, server_name, timeout=timeout, rcvbuf=rcvbuf)
        self.alpn = self.sock.selected_alpn_protocol()
        if self.alpn != "h2":
            self.sock.close()
            raise AssertionError(f"ALPN selected {self.alpn!r}, not h2")
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 24
        self.buffer = bytearray()
        self.frames = []
        self.goaways = []
        self.streams = {}
        self.closed = None
        self.write_failed = None
        self.server_settings = {}
        self._block = None  # (stream id, fragments, flags) of a header block awaiting CONTINUATION
        self._answered = 0  # frames collect() has answered (SETTINGS, PING, DATA)
        try:
            first = PREFACE + frame(SETTINGS, 0, 0, settings_payload(settings or {}))
            if connection_window:
                first += frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", connection_window))
            self.sock.sendall(first)
            deadline = time.monotonic() + timeout
            while True:
                f = self.next_frame(deadline)
                assert f is not None, f"rsp ended the connection before its SETTINGS ({self.closed})"
                if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
                    self.server_settings = dict(f.settings)
                    self.sock.sendall(frame(SETTINGS, ACK, 0))
                    # Answered: collect() must not acknowledge them again (a
                    # second ACK is a connection error, RFC 9113 section 6.5.3).
                    self._answered = len(self.frames)
                    break
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # -- building ------------------------------------------------------------------------

    def encode(self, fields):
        """The header block of `fields` ((name, value) pairs), through this
        connection's encoder: names are sent exactly as given (uppercase
        stays uppercase)."""
        return self.encoder.encode(header_list(fields))

    def request_block(self, method="GET", path="/", headers=(), authority=None, scheme="https"):
        return self.encode(request_headers(method, path, authority or self.authority, scheme, headers))

    def headers_frames(self, sid, block, end_stream=True, max_frame=DEFAULT_MAX_FRAME):
        """A header block (bytes) as HEADERS + CONTINUATION frames (bytes),
        END_HEADERS on the last."""
        pieces = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
        out = []
        for i, piece in enumerate(pieces):
            flags = END_HEADERS if i == len(pieces) - 1 else 0
            if i == 0:
                out.append(frame(HEADERS, flags | (END_STREAM if end_stream else 0), sid, piece))
            else:
                out.append(frame(CONTINUATION, flags, sid, piece))
        return b"".join(out)

    def request_frames(self, sid, method="GET", path="/", headers=(), body=None, authority=None):
        """A well-formed request on stream `sid`: HEADERS, then the body in
        DATA frames (END_STREAM on the last)."""
        out = self.headers_frames(sid, self.request_block(method, path, headers, authority), end_stream=not body)
        if body:
            pieces = [body[i:i + DEFAULT_MAX_FRAME] for i in range(0, len(body), DEFAULT_MAX_FRAME)]
            for i, piece in enumerate(pieces):
                out += frame(DATA, END_STREAM if i == len(pieces) - 1 else 0, sid, piece)
        return out

    # -- sending -------------------------------------------------------------------------

    def send(self, *items):
        """Writes frames (hyperframe objects or bytes). False if rsp has
        ended the connection (a reset, broken pipe or TLS error while
        writing: write_failed says which; what rsp sent before it closed
        is still there to read)."""
        if self.write_failed is not None:
            return False
        data = b"".join(i if isinstance(i, (bytes, bytearray)) else i.serialize() for i in items)
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError) as e:
            self.write_failed = repr(e)
            return False
        return True

    def flood(self, batches, read=True):
        """Sends each batch (bytes) of `batches` in turn (a bounded
        iterable), stopping when rsp ends the connection or sends a GOAWAY;
        with read=True reads (without blocking) what rsp sent after each
        batch, as a client that keeps reading does; with read=False reads
        nothing (a client that does not read its answers). Returns how many
        batches were sent whole."""
        sent = 0
        for batch in batches:
            if self.closed is not None or self.write_failed is not None or self.goaways:
                break
            if not self.send(batch):
                break
            sent += 1
            if read:
                self.read_available()
        return sent

    # -- reading -------------------------------------------------------------------------

    def _fill(self, deadline):
        """Reads once into the buffer. False at EOF or reset (closed says
        which); raises AssertionError past the deadline."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"nothing from rsp within the wait; {self.describe()}")
            if _readable(self.sock, min(remaining, 0.5)):
                break
        try:
            data = _recv(self.sock)
        except _Ended as e:
            self.closed = str(e)
            return False
        if not data:
            self.closed = "eof"
            return False
        self.buffer += data
        return True

    def _parse(self):
        """The next whole frame in the buffer, or None."""
        if len(self.buffer) < 9:
            return None
        f, length = Frame.parse_frame_header(memoryview(bytes(self.buffer[:9])))
        if len(self.buffer) < 9 + length:
            return None
        f.parse_body(memoryview(bytes(self.buffer[9:9 + length])))
        del self.buffer[:9 + length]
        self.frames.append(f)
        self._note(f)
        return f

    def next_frame(self, deadline):
        """The next frame rsp sends (waiting until `deadline`), or None once
        the connection has ended."""
        while True:
            f = self._parse()
            if f is not None:
                return f
            if self.closed is not None or not self._fill(deadline):
                return None

    def read_available(self):
        """Reads and parses what has arrived, without waiting."""
        while self.closed is None and _readable(self.sock, 0):
            try:
                data = _recv(self.sock)
            except _Ended as e:
                self.closed = str(e)
                break
            if not data:
                self.closed = "eof"
                break
            self.buffer += data
        while self._parse() is not None:
            pass

    def _note(self, f):
        """Keeps what a frame says about its stream or the connection."""
        if isinstance(f, GoAwayFrame):
            self.goaways.append((f.error_code, f.last_stream_id))
            return
        sid = f.stream_id
        if sid == 0:
            return
        st = self.streams.setdefault(sid, RawStream(sid))
        if isinstance(f, HeadersFrame):
            self._block = (sid, [f.data], f.flags)
            if "END_HEADERS" in f.flags:
                self._end_block()
        elif isinstance(f, ContinuationFrame) and self._block is not None:
            self._block[1].append(f.data)
            if "END_HEADERS" in f.flags:
                self._end_block()
        elif isinstance(f, DataFrame):
            st.data += f.data
            if "END_STREAM" in f.flags:
                st.ended = True
        elif isinstance(f, RstStreamFrame) and st.reset is None:
            st.reset = f.error_code  # the first one: a later one may only say the stream is closed

    def _end_block(self):
        sid, fragments, flags = self._block
        self._block = None
        fields = self.decoder.decode(b"".join(fragments), raw=True)
        st = self.streams[sid]
        status = dict(fields).get(b":status")
        if status is not None and not status.startswith(b"1"):
            st.status = int(status)
            st.headers = fields
        if "END_STREAM" in flags:
            st.ended = True

    def collect(self, sids, timeout=None):
        """Reads until every stream of `sids` ended or was reset, or the
        connection ended (then the streams are as far as they got),
        answering rsp's SETTINGS and PINGs and opening the windows by what
        DATA arrives. Returns {stream id: RawStream}."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        for sid in sids:
            self.streams.setdefault(sid, RawStream(sid))

        def answer(f):
            if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
                self.send(frame(SETTINGS, ACK, 0))
            elif isinstance(f, PingFrame) and "ACK" not in f.flags:
                self.send(frame(PING, ACK, 0, f.opaque_data))
            elif isinstance(f, DataFrame) and f.flow_controlled_length and "END_STREAM" not in f.flags:
                # The connection window was opened wide at the start: only the stream's needs it.
                n = struct.pack(">I", f.flow_controlled_length)
                self.send(frame(WINDOW_UPDATE, 0, f.stream_id, n))

        for f in self.frames[self._answered:]:
            answer(f)
        while not all(self.streams[s].done for s in sids):
            f = self.next_frame(deadline)
            if f is None:
                break
            answer(f)
        self._answered = len(self.frames)
        return {s: self.streams[s] for s in sids}

    def until_closed(self, timeout=None):
        """Reads (answering nothing) until the connection ends; returns
        (goaways, how it ended). Fails the test if it is still open after
        `timeout` s."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while self.next_frame(deadline) is not None:
            pass
        return self.goaways, self.closed

    def describe(self):
        goaways = [(error_name(c), last) for c, last in self.goaways]
        kinds = {}
        for f in self.frames:
            kinds[type(f).__name__] = kinds.get(type(f).__name__, 0) + 1
        return (f"frames received {kinds}, GOAWAYs {goaways}, closed {self.closed}"
                + (f", a write failed: {self.write_failed}" if self.write_failed else ""))
