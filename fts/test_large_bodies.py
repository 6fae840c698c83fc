"""Large bodies arrive byte-exact, whatever the speed of the reader."""

import random
import hashlib

import pytest

from client import get, request
from pattern import assert_is_pattern
from proxy import large_bodies

MiB = 1024 * 1024
LARGE = 11 * MiB  # more than every kernel buffer between proxy and client


@pytest.mark.stage(1)
@pytest.mark.unreliable(2, 4, "a write that would block (EAGAIN) or is short drops the bytes not "
                              "written, and even a client reading at full speed is sometimes slower "
                              "than the backend; test_large_response_to_client_that_pauses shows it")
def test_large_response_exact(proxy):
    """An 11 MiB response reaches a client that reads at full speed byte for byte."""
    r = get(proxy.port, f"/bytes?n={LARGE}")
    assert r.status == 200
    assert_is_pattern(r.body, LARGE)


@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, "a write that would block (EAGAIN) or is short drops the bytes not written")
def test_large_response_to_client_that_pauses(proxy):
    """A client with a tiny receive buffer that waits a second before
    reading still gets all 11 MiB: the proxy must keep what it could not
    write yet instead of dropping it."""
    r = get(proxy.port, f"/bytes?n={LARGE}", rcvbuf=4096, pause_before_read=1.0)
    assert r.status == 200
    assert_is_pattern(r.body, LARGE)


@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, "a write that would block (EAGAIN) or is short drops the bytes not written")
def test_large_response_to_client_reading_slowly(proxy):
    """A client that reads in small pieces with pauses between them still
    gets all 11 MiB."""
    r = get(proxy.port, f"/bytes?n={LARGE}", rcvbuf=16384, read_delay=0.005)
    assert r.status == 200
    assert_is_pattern(r.body, LARGE)


@pytest.mark.stage(1)
@pytest.mark.bug(2, 4, "a write that would block (EAGAIN) or is short drops the bytes not written")
def test_large_upload_to_backend_that_pauses(backend, start_proxy, stage):
    """A 12 MiB request body reaches a backend that waits a second before
    reading it byte for byte (the same problem in the other direction)."""
    proxy = start_proxy(backend, **large_bodies(stage))
    n = 12 * MiB
    body = random.Random(2).randbytes(n)
    r = request(proxy.port, "/upload?delay=1", method="POST", body=body)
    assert r.status == 200
    report = r.json()
    assert report["received"] == n, f"the backend received {report['received']} of {n} bytes"
    assert report["sha256"] == hashlib.sha256(body).hexdigest()
