"""A bounded load generator for `webhook serve`: threads that POST one AdmissionReview in a loop.

Three kinds of client run side by side, each on loopback over verified TLS:

- keep-alive: one connection reused, as the apiserver does (reconnects after an error);
- fresh: a new connection (a TLS handshake) per request, to catch failed handshakes;
- slow: a new connection per request whose body arrives in two halves `pause` seconds apart,
  so that requests are in flight whenever a fault strikes.

Every request becomes a `Record` (start, end, status, the profile the answer chose, the
error, the certificate served). Each thread stops on `stop()`, after `max_seconds`, or after
`max_requests`, whichever comes first.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import orjson

from tools.bench import bodies
from tools.loopback.https_client import (
    JSON,
    SNI,
    Connection,
    client_context,
    raw_request,
    read_response,
)
from tools.waiting import wait_for

# The seed pod (it asks `aliyun.com/gpu-mem: 2`) as the apiserver sends it.
BODY = bodies.body(bodies.seed_pod())
HEADERS = {"Content-Type": "application/json"}
# The warning names the class chosen: "lwgpu: ... -> nvidia.com/gpu=1 on GRID-P4-2Q (...)".
PROFILE = re.compile(r" on (\S+) \(")
BACKOFF_S = 0.05  # after a failed request, so a dead server is not hammered
# How long a client waits for each connect, read and write: the webhook's `timeoutSeconds`
# in deploy/, after which the apiserver gives up on a call.
TIMEOUT_S = 5.0


def connect(port: int, *ca_files: Path, timeout: float = TIMEOUT_S) -> Connection:
    """A (not yet opened) connection to the server on `port` trusting `ca_files` (TCP_NODELAY
    on, as the apiserver's Go client dials)."""
    return Connection(port, client_context(*ca_files), timeout=timeout)


@dataclass(frozen=True)
class Record:
    """One request as the client saw it."""

    client: str
    start: float
    end: float
    status: int | None  # None: no HTTP answer (refused, reset, failed handshake)
    profile: str | None
    error: str | None
    handshake: bool  # the request opened a new TLS connection
    cert: bytes | None  # DER certificate served, on a new connection
    opened: float  # when the connection it went on was opened

    def on_connection_from_before(self, at: float) -> bool:
        """True when it started after `at` on a kept-alive connection opened before `at`."""
        return self.opened < at < self.start

    def in_flight(self, at: float) -> bool:
        """True when the request had started and not yet ended at time `at`."""
        return self.start <= at <= self.end


def profile_of(status: int, data: bytes) -> str | None:
    """The lightweight GPU class a 200 answer's warning names."""
    if status != 200:
        return None
    warnings = orjson.loads(data)["response"].get("warnings") or [""]
    match = PROFILE.search(warnings[0])
    return match[1] if match else None


class Load:
    """Client threads against one server; a context manager that starts and stops them."""

    def __init__(
        self,
        port: int,
        ca_files: list[Path],
        *,
        keepalive: int = 4,
        fresh: int = 0,
        slow: int = 0,
        pause: float = 0.3,
        max_seconds: float = 90,
        max_requests: int = 100_000,
    ) -> None:
        """Plan `keepalive` + `fresh` + `slow` clients; nothing runs before `__enter__`."""
        self.port, self.ca_files, self.pause = port, ca_files, pause
        self.records: list[Record] = []  # list.append is atomic: threads share it safely
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_seconds
        self._max = max_requests
        kinds = [
            ("keepalive", keepalive, self._keepalive),
            ("fresh", fresh, self._fresh),
            ("slow", slow, self._slow),
        ]
        self._threads = [
            threading.Thread(target=self._loop, args=(f"{kind}-{i}", run), daemon=True)
            for kind, count, run in kinds
            for i in range(count)
        ]

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Ask every client to finish its current request and end; wait for them."""
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def running(self) -> bool:
        """False once the clients were stopped or ran out of time or requests."""
        return (
            not self._stop.is_set()
            and time.monotonic() < self._deadline
            and len(self.records) < self._max
        )

    def wait_requests(self, more: int, timeout: float = 30) -> None:
        """Return once `more` further requests have completed (succeeded or failed)."""
        target = len(self.records) + more
        wait_for(lambda: len(self.records) >= target, timeout, what=f"{more} more requests")

    def _loop(
        self, name: str, run: Callable[[dict[str, Any]], tuple[int, bytes, bytes | None]]
    ) -> None:
        # The keep-alive client's connection; whether this request opened one.
        state: dict[str, Any] = {}
        while self.running():
            start = time.monotonic()
            status = profile = error = cert = None
            try:
                status, data, cert = run(state)
                profile = profile_of(status, data)
            # HTTPException: a response cut short (IncompleteRead) by a worker killed mid-write.
            except (OSError, ssl.SSLError, ValueError, http.client.HTTPException) as exc:
                error = f"{type(exc).__name__}: {exc}"
            self.records.append(
                Record(
                    name,
                    start,
                    time.monotonic(),
                    status,
                    profile,
                    error,
                    state["handshake"],
                    cert,
                    state.get("opened", start),
                )
            )
            if error or status != 200:
                self._stop.wait(BACKOFF_S)
        if state.get("conn") is not None:
            state["conn"].close()

    def _keepalive(self, state: dict[str, Any]) -> tuple[int, bytes, bytes | None]:
        state["handshake"] = "conn" not in state
        if state["handshake"]:
            state["conn"] = connect(self.port, *self.ca_files)
            state["opened"] = time.monotonic()
        conn = state["conn"]
        try:
            status, headers, data = conn.call("POST", "/mutate", BODY, HEADERS)
        except BaseException:
            conn.close()
            del state["conn"]
            raise
        if headers.get("Connection", "").lower() == "close":
            conn.close()
            del state["conn"]
        return status, data, None

    def _fresh(self, state: dict[str, Any]) -> tuple[int, bytes, bytes | None]:
        state["handshake"], state["opened"] = True, time.monotonic()
        conn = connect(self.port, *self.ca_files)
        try:
            status, _, data = conn.call("POST", "/mutate", BODY, HEADERS)
            return status, data, conn.sock.getpeercert(binary_form=True)
        finally:
            conn.close()

    def _slow(self, state: dict[str, Any]) -> tuple[int, bytes, bytes | None]:
        state["handshake"], state["opened"] = True, time.monotonic()
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT_S)
        context = client_context(*self.ca_files)
        with context.wrap_socket(raw, server_hostname=SNI) as tls:
            half = len(BODY) // 2
            tls.sendall(
                raw_request("POST", "/mutate", [JSON, f"Content-Length: {len(BODY)}"]) + BODY[:half]
            )
            time.sleep(self.pause)  # the point of this client: a request that stays in flight
            tls.sendall(BODY[half:])
            response = read_response(tls)
            return response.status, response.data, None
