"""Dry-run pod creates through kube-apiserver with every connection open before the first.

`tools.reliability.creates.CreateStream` sends the seed pod open loop from a pool of threads,
each on one kept-alive HTTPS connection as the admin; it connects on a thread's first create,
so the first creates of a run would also time a TLS handshake (with a client certificate) and
a burst would time hundreds of them. `ConnectedStream` connects every thread first; when all
are connected, the run's clock starts (an open-loop stream: create i due at start + i / rate)
or, at an unbounded rate, every thread sends its create at once (a burst).
"""

from __future__ import annotations

import http.client
import math
import threading
import time

from tools.cluster.controlplane import ControlPlane
from tools.reliability.creates import Create, CreateStream

CONNECT_S = 120  # for every thread to connect: a burst opens hundreds of TLS connections


class ConnectedStream(CreateStream):
    """A `CreateStream` whose threads all connect before any create is sent."""

    def __init__(
        self, plane: ControlPlane, namespace: str, rate: float, count: int, threads: int
    ) -> None:
        """Plan the stream; nothing connects before `__enter__`."""
        super().__init__(plane, namespace, rate, count, threads)
        self._gate = threading.Barrier(threads, action=self._start_clock, timeout=CONNECT_S)
        self._passed: set[int] = set()

    def _start_clock(self) -> None:
        # Run by the last thread to connect, before any thread is released.
        self.began = time.monotonic()

    def _connection(self) -> http.client.HTTPSConnection:
        conn = super()._connection()
        conn.connect()
        me = threading.get_ident()
        if me not in self._passed:  # a reconnect after an error does not wait again
            self._passed.add(me)
            self._gate.wait()
        return conn


def stream(plane: ControlPlane, namespace: str, rate: float, seconds: float) -> list[Create]:
    """`rate` creates a second for `seconds`, open loop; a thread for every 2 a second, so
    that the stream keeps its rate while answers take under half a second."""
    count = max(1, round(rate * seconds))
    threads = max(4, min(count, math.ceil(rate / 2)))
    with ConnectedStream(plane, namespace, rate, count, threads) as sent:
        pass
    return sent.records


def burst(plane: ControlPlane, namespace: str, size: int) -> list[Create]:
    """`size` creates sent at once, one per connection."""
    with ConnectedStream(plane, namespace, math.inf, size, size) as sent:
        pass
    return sent.records
