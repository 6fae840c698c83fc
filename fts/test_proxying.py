"""Plain proxying: requests reach the backend and answers come back intact."""

import base64
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from client import build_request, exchange, get, request
from pattern import assert_is_pattern, assert_same_bytes


@pytest.mark.stage(1)
def test_get_reaches_backend_and_answer_comes_back(proxy, backend):
    """A GET goes through unchanged: the backend sees method, path and
    headers, and the client gets the backend's answer."""
    r = get(proxy.port, "/echo?x=1", headers=[("X-Test", "hello")])
    assert r.status == 200
    seen = r.json()
    assert seen["backend"] == backend.name
    assert seen["method"] == "GET"
    assert seen["path"] == "/echo?x=1"
    assert ["X-Test", "hello"] in seen["headers"]
    assert backend.hits["/echo"] == 1


@pytest.mark.stage(1)
def test_small_body_exact(proxy):
    """A small response body arrives byte for byte."""
    r = get(proxy.port, "/bytes?n=1000")
    assert r.status == 200
    assert r.header("Content-Length") == "1000"
    assert_is_pattern(r.body, 1000)


@pytest.mark.stage(1)
def test_two_sequential_requests(proxy, backend):
    """The proxy serves a second connection after the first one ended."""
    for n in (10, 20000):
        r = get(proxy.port, f"/bytes?n={n}")
        assert r.status == 200
        assert_is_pattern(r.body, n)
    assert backend.hits["/bytes"] == 2


@pytest.mark.stage(1)
def test_post_body_forwarded_exactly(proxy):
    """A 1 MiB request body reaches the backend byte for byte."""
    body = random.Random(1).randbytes(1024 * 1024)
    r = request(proxy.port, "/echo", method="POST", body=body)
    assert r.status == 200
    seen = r.json()
    assert seen["method"] == "POST"
    assert seen["body_length"] == len(body)
    assert_same_bytes(base64.b64decode(seen["body_base64"]), body, "body the backend received")


@pytest.mark.stage(1)
def test_request_sent_one_byte_at_a_time(proxy):
    """A request that arrives in many tiny segments is relayed whole."""
    r = exchange(proxy.port, build_request(proxy.port, "GET", "/echo?tiny=1"), byte_by_byte=True)
    assert r.status == 200
    assert r.json()["path"] == "/echo?tiny=1"


@pytest.mark.stage(1)
def test_slowly_streamed_response_complete(proxy):
    """A backend that sends its answer in pieces with pauses between them
    is relayed completely."""
    r = get(proxy.port, "/drip?chunks=5&size=1000&delay=0.1")
    assert r.status == 200
    assert_is_pattern(r.body, 5000)


@pytest.mark.stage(1)
def test_many_sequential_requests(proxy, backend):
    """200 requests one after the other all succeed."""
    for i in range(200):
        r = get(proxy.port, f"/bytes?n={i}")
        assert r.status == 200, f"request {i}: {r!r}"
        assert_is_pattern(r.body, i)
    assert backend.hits["/bytes"] == 200


@pytest.mark.stage(2)
def test_simultaneous_requests_in_flight(proxy, backend):
    """Eight requests are inside the backend at the same time: /barrier
    answers 200 only once all eight have arrived, so a proxy serving one
    client at a time would get 500s."""
    n = 8
    with ThreadPoolExecutor(n) as pool:
        responses = list(pool.map(lambda _: get(proxy.port, f"/barrier?n={n}"), range(n)))
    assert [r.status for r in responses] == [200] * n
    assert backend.hits["/barrier"] == n


@pytest.mark.stage(2)
def test_many_concurrent_clients_no_cross_talk(proxy):
    """100 concurrent clients each get their own answer (each asks for a
    different length, so a mixed-up pairing shows)."""
    lengths = [1000 + 37 * i for i in range(100)]
    with ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(lambda n: get(proxy.port, f"/bytes?n={n}"), lengths))
    for n, r in zip(lengths, responses):
        assert r.status == 200, f"n={n}: {r!r}"
        assert_is_pattern(r.body, n)
