"""A small WebSocket (RFC 6455) implementation, stdlib only, to test
upgrades through rsp (stage 09 on).

WebSocketBackend  an echo server: the opening handshake (101 with
                  Sec-WebSocket-Accept), then every message sent back as one
                  frame; ping answered by pong; the close handshake. It can be
                  told to refuse upgrades (refuse=403, or refuse=200: an
                  ordinary answer), staying HTTP/1.1 on that connection.
WebSocketClient   the handshake through the proxy, masked frames (7, 16 and
                  64-bit lengths, fragmented messages), reading frames.
"""

import base64
import hashlib
import json
import os
import threading

from backends import RawBackend, _ConnReader
from client import Conn, READ_TIMEOUT

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
CONTROL = (CLOSE, PING, PONG)


def accept_key(key):
    """The Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455, 4.2.2)."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode("ascii")).digest()).decode("ascii")


def apply_mask(mask, data):
    """data XOR the 4-byte mask repeated (masking and unmasking alike)."""
    n = len(data)
    if n == 0:
        return b""
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


def encode_frame(opcode, payload, fin=True, mask=None):
    """One frame; mask (4 bytes) for a client's frame, None for a server's."""
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    mask_bit = 0x80 if mask is not None else 0
    if n < 126:
        head = bytes([first, mask_bit | n])
    elif n < 65536:
        head = bytes([first, mask_bit | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([first, mask_bit | 127]) + n.to_bytes(8, "big")
    if mask is not None:
        return head + mask + apply_mask(mask, payload)
    return head + payload


class Frame:
    def __init__(self, fin, opcode, masked, payload):
        self.fin, self.opcode, self.masked, self.payload = fin, opcode, masked, payload

    def __repr__(self):
        return f"<frame fin={self.fin} opcode={self.opcode:#x} masked={self.masked} {len(self.payload)} bytes>"


class ProtocolError(Exception):
    pass


def read_frame(exactly):
    """Reads one frame with exactly(n) (a function returning n bytes);
    unmasks the payload if it is masked."""
    b0, b1 = exactly(2)
    if b0 & 0x70:
        raise ProtocolError(f"reserved bits set: {b0:#x}")
    fin, opcode, masked, n = bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
    if n == 126:
        n = int.from_bytes(exactly(2), "big")
    elif n == 127:
        n = int.from_bytes(exactly(8), "big")
    if opcode in CONTROL and (n > 125 or not fin):
        raise ProtocolError(f"a control frame of {n} bytes, fin={fin}")
    mask = exactly(4) if masked else None
    payload = exactly(n) if n else b""
    if masked:
        payload = apply_mask(mask, payload)
    return Frame(fin, opcode, masked, payload)


def _tokens(value):
    return [t.strip().lower() for t in (value or "").split(",") if t.strip()]


class WebSocketBackend:
    """A WebSocket echo backend on 127.0.0.1 (RawBackend underneath).

    A request with Upgrade: websocket, Connection: upgrade and a
    Sec-WebSocket-Key gets a 101 (unless refuse is set), and the connection
    then speaks WebSocket: each message (fragments joined) is echoed as one
    frame of its opcode, a ping gets a pong with its payload, a close gets a
    close with the same status code, and the backend then closes the TCP
    connection. An unmasked client frame gets a close with 1002.

    refuse=403 answers upgrade requests with 403, refuse=200 with an
    ordinary 200: the connection stays HTTP/1.1 and keeps serving requests.
    Any other request gets 200 with JSON {"path", "request": its number on
    the connection, "upgrade": the Upgrade header it saw}.

    Recorded: `heads` (each request head: (request line, [(name, value)])),
    `connections`, `messages` (echoed), `pings`, `closes` (the status
    codes of the close frames received), `errors`."""

    def __init__(self, refuse=None):
        self.refuse = refuse
        self.heads = []
        self.messages = 0
        self.pings = 0
        self.closes = []
        self.errors = []
        self._lock = threading.Lock()
        self._raw = RawBackend(self._handle)
        self.host, self.port = self._raw.host, self._raw.port

    @property
    def connections(self):
        return self._raw.connections

    def stop(self):
        self._raw.stop()

    def _handle(self, conn, raw):
        reader = _ConnReader(conn)
        served = 0
        try:
            while True:
                reader.compact()
                head = reader.until(b"\r\n\r\n")
                served += 1
                lines = head[:-4].decode("latin-1").split("\r\n")
                headers = [(n.strip(), v.strip()) for n, _, v in (line.partition(":") for line in lines[1:])]
                fields = {n.lower(): v for n, v in headers}
                with self._lock:
                    self.heads.append((lines[0], headers))
                length = int(fields.get("content-length", "0") or 0)
                if length:
                    reader.exactly(length)
                upgrade = ("websocket" in _tokens(fields.get("upgrade"))
                           and "upgrade" in _tokens(fields.get("connection"))
                           and "sec-websocket-key" in fields)
                if upgrade and self.refuse is None:
                    conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                  "Connection: Upgrade\r\n"
                                  f"Sec-WebSocket-Accept: {accept_key(fields['sec-websocket-key'])}\r\n"
                                  "\r\n").encode("latin-1"))
                    self._echo(conn, reader)
                    return
                if upgrade and self.refuse == 403:
                    status, body = "403 Forbidden", b"no WebSocket here\n"
                else:
                    path = lines[0].split(" ")[1] if " " in lines[0] else ""
                    status = "200 OK"
                    body = json.dumps({"path": path, "request": served,
                                       "upgrade": fields.get("upgrade")}).encode()
                closing = "close" in _tokens(fields.get("connection"))
                conn.sendall((f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                              + ("Connection: close\r\n" if closing else "") + "\r\n").encode("latin-1") + body)
                if closing:
                    return
        except EOFError:
            return
        except (ProtocolError, ValueError) as e:
            self.errors.append(repr(e))

    def _echo(self, conn, reader):
        message, message_opcode = None, None
        while True:
            frame = read_frame(reader.exactly)
            if not frame.masked:
                self.errors.append("an unmasked frame from the client")
                conn.sendall(encode_frame(CLOSE, (1002).to_bytes(2, "big")))
                return
            if frame.opcode == PING:
                with self._lock:
                    self.pings += 1
                conn.sendall(encode_frame(PONG, frame.payload))
            elif frame.opcode == PONG:
                pass
            elif frame.opcode == CLOSE:
                with self._lock:
                    self.closes.append(int.from_bytes(frame.payload[:2], "big") if frame.payload else None)
                conn.sendall(encode_frame(CLOSE, frame.payload[:2]))
                return
            elif frame.opcode in (TEXT, BINARY):
                if message is not None:
                    raise ProtocolError("a new message inside a fragmented one")
                if frame.fin:
                    self._send_echo(conn, frame.opcode, frame.payload)
                else:
                    message, message_opcode = [frame.payload], frame.opcode
            elif frame.opcode == CONTINUATION:
                if message is None:
                    raise ProtocolError("a continuation frame outside a message")
                message.append(frame.payload)
                if frame.fin:
                    self._send_echo(conn, message_opcode, b"".join(message))
                    message = None
            else:
                raise ProtocolError(f"unknown opcode {frame.opcode:#x}")

    def _send_echo(self, conn, opcode, payload):
        conn.sendall(encode_frame(opcode, payload))
        with self._lock:
            self.messages += 1

    def __repr__(self):
        return f"<WebSocketBackend on {self.host}:{self.port}>"


class WebSocketClient:
    """A WebSocket client through the proxy on 127.0.0.1:port (Host: `host`
    if given, else 127.0.0.1:PORT). The opening handshake is sent at once; `response` is the answer (framed: after a
    101 the connection is WebSocket, after anything else it is still
    HTTP and `conn` (a client.Conn) can send another request).
    upgraded() says whether a 101 with the right Sec-WebSocket-Accept came."""

    def __init__(self, port, path="/ws", headers=(), timeout=READ_TIMEOUT, host=None):
        self.conn = Conn(port, timeout=timeout, host=host)
        self.key = base64.b64encode(os.urandom(16)).decode("ascii")
        try:
            self.conn.send(self.conn.request_bytes("GET", path, [
                ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                ("Sec-WebSocket-Key", self.key), ("Sec-WebSocket-Version", "13"), *headers]))
            self.response = self.conn.read_response()
        except BaseException:
            self.conn.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close_socket()

    def close_socket(self):
        self.conn.close()

    def upgraded(self):
        r = self.response
        return r.status == 101 and r.header("Sec-WebSocket-Accept") == accept_key(self.key)

    def send_frame(self, opcode, payload, fin=True):
        self.conn.send(encode_frame(opcode, payload, fin, mask=os.urandom(4)))

    def send_message(self, payload, opcode=BINARY, fragment=None):
        """One message; fragment=N cuts it into frames of N bytes (a first
        frame with the opcode, then continuation frames)."""
        if not fragment or len(payload) <= fragment:
            self.send_frame(opcode, payload)
            return
        pieces = [payload[i:i + fragment] for i in range(0, len(payload), fragment)]
        frames = [encode_frame(opcode if i == 0 else CONTINUATION, piece, i == len(pieces) - 1, os.urandom(4))
                  for i, piece in enumerate(pieces)]
        self.conn.send(b"".join(frames))

    def recv_frame(self):
        return read_frame(lambda n: self.conn.reader.exactly(n, "a WebSocket frame"))

    def recv_message(self):
        """(opcode, payload) of the next message, continuation frames joined."""
        frame = self.recv_frame()
        if frame.opcode in CONTROL or frame.fin:
            return frame.opcode, frame.payload
        parts, opcode = [frame.payload], frame.opcode
        while True:
            frame = self.recv_frame()
            if frame.opcode != CONTINUATION:
                raise ProtocolError(f"expected a continuation frame, got {frame!r}")
            parts.append(frame.payload)
            if frame.fin:
                return opcode, b"".join(parts)

    def ping(self, payload=b"ping"):
        """Sends a ping; returns the next frame (it should be the pong)."""
        self.send_frame(PING, payload)
        return self.recv_frame()

    def close(self, code=1000):
        """The close handshake: sends a close frame with `code` and returns
        the frame that comes back (it should be a close with that code)."""
        self.send_frame(CLOSE, code.to_bytes(2, "big"))
        return self.recv_frame()

