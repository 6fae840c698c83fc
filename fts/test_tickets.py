"""Session-ticket keys that rotate (stage 19): every `ticket_key_lifetime`
seconds the master (or rsp alone) makes a new key, in memory every worker
shares, and logs "session-ticket key rotated"; the key before it still
decrypts for one more lifetime (a ticket under it resumes, and the client
gets a new ticket under the current key), and is then gone: a ticket from
two rotations ago gets a full handshake (and is served all the same).

The tests run with a lifetime of LIFETIME seconds and follow the rotations
in rsp's log: each step starts right after a rotation is logged, so it has
a whole lifetime to do what it must within that key's time. Waiting is a
bounded poll; no time is asserted.
"""

import ssl

import pytest

from checks import assert_config_error, log_lines
from netutil import wait_for
from proxy import proxy_arguments, run_rsp
from test_tls import POLL_TIMEOUT, WWW, ca, certs, start_tls, tls_conn_on_worker  # noqa: F401 (fixtures)
from test_workers import started_workers
from tlsutil import https_get

pytestmark = pytest.mark.stage(19)

LIFETIME = 3                 # s: ticket_key_lifetime in these tests
ROTATED = "session-ticket key rotated"
VERSIONS = pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["1.2", "1.3"])


def rotations(proxy):
    """How many rotations rsp has logged."""
    return len(log_lines(proxy, ROTATED))


def next_rotation(proxy):
    """Waits (bounded) for the next rotation to be logged; returns the
    count of rotations then."""
    seen = rotations(proxy)
    wait_for(lambda: rotations(proxy) > seen, f"a rotation after the {seen} logged ({ROTATED!r})",
             LIFETIME + POLL_TIMEOUT)
    return rotations(proxy)


def fresh_session(proxy, context):
    """Right after a rotation, a request on a new connection (not resumed):
    its session (a ticket under the key just made) and the rotation count."""
    count = next_rotation(proxy)
    first = https_get(proxy.tls_port, "/bytes?n=10", context, WWW)
    assert first.status == 200 and not first.session_reused
    assert first.session is not None and first.session.has_ticket, "no session ticket from rsp"
    return first.session, count


@VERSIONS
def test_ticket_resumes_after_one_rotation(backend, start_proxy, certs, ca, version):
    """A ticket from before a rotation resumes after it (the previous key
    still decrypts)."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], ticket_key_lifetime=LIFETIME)
    c = ca.client_context(minimum=version, maximum=version)
    session, count = fresh_session(proxy, c)
    assert next_rotation(proxy) == count + 1
    again = https_get(proxy.tls_port, "/bytes?n=10", c, WWW, session=session)
    assert again.status == 200
    assert again.session_reused, \
        f"a ticket from one rotation ago was not resumed (rotations logged: {rotations(proxy)}, it was {count})"


@VERSIONS
def test_ticket_is_refused_after_two_rotations_and_a_renewed_one_resumes(backend, start_proxy, certs, ca,
                                                                          version):
    """A ticket resumed under the previous key is renewed (the client gets
    one under the current key); after a second rotation the first ticket
    gets a full handshake (its key is gone) and is served, while the
    renewed one still resumes."""
    proxy = start_tls(start_proxy, backend, certificates=[certs.www], ticket_key_lifetime=LIFETIME)
    c = ca.client_context(minimum=version, maximum=version)
    session, count = fresh_session(proxy, c)
    assert next_rotation(proxy) == count + 1
    renewed = https_get(proxy.tls_port, "/bytes?n=10", c, WWW, session=session)
    assert renewed.session_reused, "a ticket from one rotation ago was not resumed"
    assert next_rotation(proxy) == count + 2
    old = https_get(proxy.tls_port, "/bytes?n=10", c, WWW, session=session)
    assert old.status == 200, "a client offering an expired ticket was not served"
    assert not old.session_reused, "a ticket from two rotations ago was still resumed: its key lives on"
    again = https_get(proxy.tls_port, "/bytes?n=10", c, WWW, session=renewed.session)
    assert again.session_reused, \
        f"the ticket renewed one rotation ago was not resumed (rotations logged: {rotations(proxy)}, " \
        f"it was {count + 1})"


@VERSIONS
def test_rotated_keys_are_shared_by_the_workers(make_backend, start_proxy, certs, ca, version):
    """workers = 2 (one listening socket): after a rotation (made by the
    master, after the workers were forked), a ticket worker 1 issued
    resumes on worker 2; after two more, neither worker resumes it."""
    proxy = start_tls(start_proxy, make_backend("a"), certificates=[certs.www], workers=2,
                      ticket_key_lifetime=LIFETIME)
    pids = started_workers(proxy, 2)
    c = ca.client_context(minimum=version, maximum=version)
    count = next_rotation(proxy)
    with tls_conn_on_worker(proxy, c, pids[0], pids) as first:
        assert first.get("/bytes?n=10").status == 200
        session = first.session
    with tls_conn_on_worker(proxy, c, pids[1], pids, session=session) as other:
        assert other.get("/bytes?n=10").status == 200
        assert other.session_reused, \
            f"a ticket from worker 1 was not resumed by worker 2 (rotations: {rotations(proxy)}, it was {count})"
    assert next_rotation(proxy) == count + 1
    assert next_rotation(proxy) == count + 2
    for pid in pids:
        with tls_conn_on_worker(proxy, c, pid, pids, session=session) as late:
            assert late.get("/bytes?n=10").status == 200
            assert not late.session_reused, f"worker {pid} resumed a ticket from two rotations ago"


@pytest.mark.parametrize("value", [0, 0.5, 604801, '"12h"'])
def test_bad_ticket_key_lifetime(rsp, tmp_path, value):
    """ticket_key_lifetime outside 1 to 604800 seconds (or not a number):
    rsp -t refuses the config, naming the setting."""
    (path,) = proxy_arguments(rsp.stage, 18080, [("127.0.0.1", 8001)], str(tmp_path))
    with open(path, "a") as f:
        f.write(f"ticket_key_lifetime = {value}\n")
    assert_config_error(run_rsp(rsp, ["-t", path], tmp_path), path, "ticket_key_lifetime", words=("1", "604800"))
