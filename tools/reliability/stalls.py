"""Misbehaving clients for the attack suite: connections held open at one phase of a request.

`Stalls(port, ca, kind, count)` is a thread that keeps `count` connections of one kind
open until stopped, opening a new one whenever the server closes one (so the pressure
stays on while deadlines cut connections off), and counts what the server did to them.
Kinds follow the issue's table: a TCP connect and nothing more, one byte of a TLS
ClientHello, a finished handshake and then silence, a request head sent one byte per
second, and a body shorter than its Content-Length. Loopback only; bounded by `stop()`.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
import time
from pathlib import Path

KINDS = ("tcp only", "client-hello byte", "after handshake", "slow head", "short body")
HEAD = b"POST /mutate HTTP/1.1\r\nHost: lwgpu-webhook\r\nContent-Type: application/json\r\n"
TRICKLE_S = 1.0  # one byte of the head per connection per second


class Stalls(threading.Thread):
    """Keeps `count` stalled connections of `kind` open against 127.0.0.1:`port`."""

    def __init__(self, port: int, ca: Path, kind: str, count: int) -> None:
        super().__init__(daemon=True, name=f"stalls-{kind}")
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        self.port, self.kind, self.count = port, kind, count
        self.context = ssl.create_default_context(cafile=str(ca))
        self.opened = self.closed_by_server = self.refused = 0
        self.answers: dict[str, int] = {}  # first line of what the server sent before closing
        self.held = threading.Event()  # set once `count` connections are open
        self._stopping = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._next_byte: dict[socket.socket, int] = {}
        self._last_trickle = 0.0

    def stop(self) -> None:
        """Close every connection and end the thread."""
        self._stopping.set()
        self.join(30)

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._top_up()
                self.held.set()
                self._serve_events(timeout=0.2)
                self._trickle()
        finally:
            for key in list(self._selector.get_map().values()):
                with contextlib.suppress(OSError):
                    key.fileobj.close()  # type: ignore[union-attr]
            self._selector.close()

    def _top_up(self) -> None:
        while len(self._selector.get_map()) < self.count and not self._stopping.is_set():
            try:
                sock = self._open()
            except OSError:
                self.refused += 1
                return
            self.opened += 1
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)

    def _open(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if self.kind == "tcp only":
            return sock
        if self.kind == "client-hello byte":
            sock.sendall(b"\x16")
            return sock
        tls = self.context.wrap_socket(sock, server_hostname="localhost")
        if self.kind == "slow head":
            self._next_byte[tls] = 0
        elif self.kind == "short body":
            tls.sendall(HEAD + b"Content-Length: 4096\r\n\r\n" + b'{"apiVersion":')
        return tls

    def _serve_events(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except (BlockingIOError, ssl.SSLWantReadError):
                continue
            except OSError:
                data = b""
            if data:
                first = data.split(b"\r\n", 1)[0].decode(errors="replace")[:40]
                self.answers[first] = self.answers.get(first, 0) + 1
            self._forget(sock)
            self.closed_by_server += 1

    def _forget(self, sock: socket.socket) -> None:
        self._selector.unregister(sock)
        self._next_byte.pop(sock, None)
        with contextlib.suppress(OSError):
            sock.close()

    def _trickle(self) -> None:
        now = time.monotonic()
        if self._last_trickle + TRICKLE_S > now:
            return
        self._last_trickle = now
        for sock, index in list(self._next_byte.items()):
            with contextlib.suppress(OSError, ssl.SSLWantWriteError):
                sock.send(HEAD[index % len(HEAD) : index % len(HEAD) + 1])
                self._next_byte[sock] = index + 1
