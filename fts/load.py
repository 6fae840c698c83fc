"""Steady load for tests that change something under it (a reload): a
few clients sending GETs the whole time, each response checked.

    with SteadyLoad(proxy.port, {"a1", "a2", "b"}, keepalive=2, fresh=2) as load:
        ... reload 20 times ...
    load.assert_clean()          # no client hung, not one request failed
    load.served                  # Counter: responses by backend (X-Backend)

Keep-alive clients send their requests on one connection (opening another
when the server closes it, and with reconnect_every=N after N requests);
fresh clients open a connection per request. Every response must be a
complete 200 of the size asked for, made of pattern.py's bytes, from one
of `names` (the KeepAliveBackend's /cl route, which names itself in
X-Backend)."""

import collections
import threading

from client import Conn, get
from pattern import assert_is_pattern


class SteadyLoad:
    def __init__(self, port, names, keepalive=2, fresh=2, reconnect_every=None):
        self.port = port
        self.names = set(names)
        self.reconnect_every = reconnect_every
        self.failures = []
        self.served = collections.Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._keepalive_client, args=(t,), daemon=True)
                         for t in range(keepalive)]
        self._threads += [threading.Thread(target=self._fresh_client, args=(t,), daemon=True)
                          for t in range(keepalive, keepalive + fresh)]

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for thread in self._threads:
            thread.join(15)
        return False

    def assert_clean(self):
        """No client hung; not one request failed."""
        assert not any(thread.is_alive() for thread in self._threads), "a client hung"
        assert not self.failures, f"{len(self.failures)} failed requests, e.g.: {self.failures[:5]}"

    def _fail(self, message):
        with self._lock:
            self.failures.append(message)

    def _check(self, r, size, what):
        if r.status != 200 or not r.complete or r.header("X-Backend") not in self.names or len(r.body) != size:
            self._fail(f"{what}: {r!r} {r.raw[:200]!r}")
            return
        try:
            assert_is_pattern(r.body, size)
        except AssertionError as e:
            self._fail(f"{what}: {e}")
            return
        with self._lock:
            self.served[r.header("X-Backend")] += 1

    def _keepalive_client(self, t):
        conn, n = None, 0
        try:
            while not self._stop.is_set():
                if conn is None:
                    conn = Conn(self.port, timeout=10)
                size = 100 + (37 * n) % 5000
                try:
                    r = conn.get(f"/cl?size={size}&t={t}&n={n}")
                except Exception as e:
                    self._fail(f"keep-alive client {t}, request {n}: {e!r}")
                    conn.close()
                    conn = None
                    continue
                self._check(r, size, f"keep-alive client {t}, request {n}")
                n += 1
                if ("close" in r.connection_tokens() or r.eof or
                        (self.reconnect_every is not None and n % self.reconnect_every == 0)):
                    conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()

    def _fresh_client(self, t):
        n = 0
        while not self._stop.is_set():
            size = 200 + (53 * n) % 7000
            try:
                r = get(self.port, f"/cl?size={size}&t={t}&n={n}", timeout=10)
            except Exception as e:
                self._fail(f"client {t}, request {n}: {e!r}")
                continue
            self._check(r, size, f"client {t}, request {n}")
            n += 1
