#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_tls: fuzz/corpus/tls/.

The seeds are checked in; this script documents what each one is and can
rewrite them (./make-tls-seeds.py from fuzz/; needs the openssl command
line tool, and takes a few seconds). Real ClientHellos come from `openssl
s_client` (run against a recorder on 127.0.0.1, or through it to a local
`openssl s_server` for a whole handshake, so that a session ticket can be
kept and offered again); the rest are written by hand.

Each seed starts with fuzz_tls's control byte (see fuzz_tls.c): bits 0-5
the size of the pieces the rest arrives in (0: at once), bit 6 "rsp only
shuts its write side, without an answer", bit 7 "rsp answers before the
first byte". Everything after it is what a client sends."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOOPBACK = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def first_records(stream, count=1):
    """The first `count` TLS records (5-byte header + body) of stream."""
    at = 0
    for _ in range(count):
        if len(stream) < at + 5:
            break
        at += 5 + int.from_bytes(stream[at + 3:at + 5], "big")
    return stream[:at]


def record_client(client_argv, upstream=None, stdin=b"", seconds=3.0):
    """Runs client_argv (an openssl s_client ... -connect 127.0.0.1:PORT,
    PORT filled in) against a recorder on 127.0.0.1; with upstream (a
    port), the recorder relays both ways to it. Returns every byte the
    client sent."""
    listener = socket.socket()
    listener.bind((LOOPBACK, 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    sent = bytearray()

    def serve():
        conn, _ = listener.accept()
        conn.settimeout(seconds)
        up = socket.create_connection((LOOPBACK, upstream)) if upstream else None
        if up:
            up.settimeout(seconds)

            def back():
                try:
                    while True:
                        data = up.recv(65536)
                        if not data:
                            break
                        conn.sendall(data)
                except OSError:
                    pass
            threading.Thread(target=back, daemon=True).start()
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                sent.extend(data)
                if up:
                    up.sendall(data)
                elif len(sent) >= 5 and len(sent) >= 5 + int.from_bytes(sent[3:5], "big"):
                    break  # a whole first record (the ClientHello) is all we want without a server
        except OSError:
            pass
        conn.close()
        if up:
            up.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    argv = [a.replace("PORT", str(port)) for a in client_argv]
    try:
        subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=seconds + 2)
    except subprocess.TimeoutExpired:
        pass
    thread.join(seconds + 2)
    listener.close()
    return bytes(sent)


def sslv2_client_hello():
    """An SSLv2-format ClientHello offering TLS 1.0 (what very old clients
    send; OpenSSL still parses it before refusing the version)."""
    ciphers = bytes.fromhex("00c02f" "00c030" "00009c" "0000ff")
    challenge = bytes(range(16))
    body = b"\x01\x03\x01" + len(ciphers).to_bytes(2, "big") + b"\x00\x00" + len(challenge).to_bytes(2, "big") \
        + ciphers + challenge
    return bytes([0x80 | (len(body) >> 8), len(body) & 0xff]) + body


def main():
    if not shutil.which("openssl"):
        sys.exit("make-tls-seeds: needs the openssl command line tool")
    tmp = tempfile.mkdtemp(prefix="rsp-tls-seeds-")
    server = None
    try:
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server_port = free_port()
        server = subprocess.Popen(["openssl", "s_server", "-accept", f"{LOOPBACK}:{server_port}", "-cert", cert,
                                   "-key", key, "-www", "-alpn", "http/1.1", "-quiet"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection((LOOPBACK, server_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        client = ["openssl", "s_client", "-connect", f"{LOOPBACK}:PORT", "-ign_eof"]
        request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        session = os.path.join(tmp, "session.pem")

        # A whole TLS 1.3 session: ClientHello, ChangeCipherSpec, Finished,
        # the request (encrypted under keys this harness never has).
        tls13 = record_client(client + ["-servername", "localhost", "-alpn", "http/1.1", "-sess_out", session],
                              upstream=server_port, stdin=request)
        tls12 = record_client(client + ["-servername", "localhost", "-alpn", "http/1.1", "-tls1_2"],
                              upstream=server_port, stdin=request)
        resumed = record_client(client + ["-servername", "localhost", "-sess_in", session],
                                upstream=server_port, stdin=request) if os.path.exists(session) else b""
        hello = lambda *extra: first_records(record_client(client + list(extra)))
        seeds = {
            # The handshakes, whole and in pieces.
            "tls13-clienthello": b"\x00" + first_records(tls13),
            "tls13-client-stream": b"\x00" + tls13,
            "tls13-clienthello-bytewise": b"\x01" + first_records(tls13),
            "tls13-clienthello-5-byte-pieces": b"\x05" + first_records(tls13),
            "tls13-clienthello-answer-first": b"\x80" + first_records(tls13),
            "tls13-clienthello-shutdown-only-first": b"\xc0" + first_records(tls13),
            "tls13-clienthello-then-shutdown-only": b"\x40" + first_records(tls13),
            "tls12-clienthello": b"\x00" + first_records(tls12),
            "tls12-client-stream": b"\x00" + tls12,
            # Offering the session ticket the first handshake got (a
            # pre_shared_key extension; the harness's ticket keys differ).
            "tls13-resumption-clienthello": b"\x00" + first_records(resumed),
            # Versions and options rsp refuses or must pick among.
            "tls10-clienthello": b"\x00" + hello("-tls1", "-cipher", "DEFAULT@SECLEVEL=0"),
            "tls11-clienthello": b"\x00" + hello("-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"),
            "tls12-rsa-only-ciphers": b"\x00" + hello("-tls1_2", "-cipher", "AES128-SHA"),
            "alpn-h2-only": b"\x00" + hello("-alpn", "h2", "-servername", "localhost"),
            "sni-wildcard-certificate": b"\x00" + hello("-servername", "www.example.com"),
            "sni-exact-second-certificate": b"\x00" + hello("-servername", "EXAMPLE.com"),
            "sni-unknown": b"\x00" + hello("-servername", "unknown.example.org"),
            "no-sni": b"\x00" + hello("-noservername"),
            "sslv2-format-clienthello": b"\x00" + sslv2_client_hello(),
            # Not TLS at all.
            "http-request": b"\x00" + request,
            "http-request-answer-first": b"\x80" + request,
            "empty-stream": b"\x00",
            "empty": b"",
        }
        directory = os.path.join(HERE, "corpus", "tls")
        os.makedirs(directory, exist_ok=True)
        for name, data in seeds.items():
            if len(data) <= 1 and name not in ("empty", "empty-stream"):
                print(f"make-tls-seeds: {name}: openssl sent nothing; skipped", file=sys.stderr)
                continue
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
        print(f"wrote {len(seeds)} seeds to {os.path.relpath(directory)}")
    finally:
        if server:
            server.terminate()
            server.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
