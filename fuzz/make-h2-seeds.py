#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_h2: fuzz/corpus/h2/.

The seeds are checked in; this script documents what each one is and can
rewrite them (./make-h2-seeds.py from fuzz/). Each seed starts with
fuzz_h2's control byte (see fuzz_h2.c): bits 0-6 the size of the pieces
the rest arrives in (0: at once), bit 7 "the owner answers each request at
once, not when it ended". The rest is what a client sends after the
preface (which the harness sends itself): frames, their header blocks
written with HPACK's static table (RFC 7541, appendix A) by hand."""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "h2")

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(index, value):
    """A field with incremental indexing, its name from the static table."""
    v = value.encode()
    return bytes([0x40 | index, len(v)]) + v


def literal_name(name, value):
    """A field with incremental indexing and a literal name."""
    n, v = name.encode(), value.encode()
    return bytes([0x40, len(n)]) + n + bytes([len(v)]) + v


GET = bytes([0x82, 0x87, 0x84]) + literal(1, "example.com")   # GET https / example.com
POST = bytes([0x83, 0x87, 0x84]) + literal(1, "example.com")
SETTINGS_EMPTY = frame(SETTINGS, 0, 0)


def seeds():
    yield "settings", SETTINGS_EMPTY + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 1024) + struct.pack(">HI", 1, 0)) \
        + frame(SETTINGS, ACK, 0)
    yield "get", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET)
    yield "get-bytewise", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET)
    yield "get-answer-at-once", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET)
    yield "two-gets-dynamic-table", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET) \
        + frame(HEADERS, END_STREAM | END_HEADERS, 3, bytes([0x82, 0x87, 0x85, 0xbe]))
    yield "post-content-length", SETTINGS_EMPTY + frame(HEADERS, END_HEADERS, 1, POST + literal(28, "5")) \
        + frame(DATA, END_STREAM, 1, b"hello")
    yield "post-chunks-trailers", SETTINGS_EMPTY + frame(HEADERS, END_HEADERS, 1, POST + literal_name("te", "trailers")) \
        + frame(DATA, 0, 1, b"hel") + frame(DATA, 0, 1, b"lo") \
        + frame(HEADERS, END_STREAM | END_HEADERS, 1, literal_name("x-sum", "1"))
    yield "padded", SETTINGS_EMPTY \
        + frame(HEADERS, END_HEADERS | PADDED | PRIO, 1, bytes([2]) + struct.pack(">IB", 0, 15) + POST + b"\0\0") \
        + frame(DATA, END_STREAM | PADDED, 1, bytes([3]) + b"abc" + b"\0\0\0")
    yield "continuation", SETTINGS_EMPTY + frame(HEADERS, END_STREAM, 1, GET[:2]) \
        + frame(CONTINUATION, 0, 1, GET[2:3]) + frame(CONTINUATION, END_HEADERS, 1, GET[3:])
    yield "priority", SETTINGS_EMPTY + frame(PRIORITY, 0, 3, struct.pack(">IB", 0, 200)) \
        + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET)
    yield "rst-stream", SETTINGS_EMPTY + frame(HEADERS, END_HEADERS, 1, POST) + frame(RST_STREAM, 0, 1, struct.pack(">I", 8))
    yield "ping", SETTINGS_EMPTY + frame(PING, 0, 0, b"12345678") + frame(PING, ACK, 0, b"rsp-bye!")
    yield "goaway", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET) \
        + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0) + b"bye")
    yield "window-update", SETTINGS_EMPTY + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)) \
        + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 3)) \
        + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 100000)) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 100))
    yield "push-promise", SETTINGS_EMPTY + frame(PUSH_PROMISE, END_HEADERS, 1, struct.pack(">I", 2) + GET)
    yield "unknown-frame", SETTINGS_EMPTY + frame(0x42, 0, 0, b"x") + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET)
    yield "uppercase-name", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET + literal_name("X-A", "1"))
    yield "connection-header", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET + literal_name("connection", "close"))
    yield "host-disagrees", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET + literal(38, "other.com"))
    yield "cookies", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, GET + literal(32, "a=1") + literal(32, "b=2"))
    yield "connect", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, bytes([0x42, 7]) + b"CONNECT" + literal(1, "e:443"))
    yield "options-star", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                                 bytes([0x42, 7]) + b"OPTIONS" + bytes([0x87]) + literal(4, "*") + literal(1, "e"))
    yield "table-size-update", SETTINGS_EMPTY + frame(HEADERS, END_STREAM | END_HEADERS, 1, bytes([0x20]) + GET)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, body in seeds():
        control = 0x01 if name.endswith("bytewise") else 0x80 if name.endswith("at-once") else 0x00
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(bytes([control]) + body)


if __name__ == "__main__":
    main()
