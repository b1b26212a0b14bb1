"""The gunicorn worker: gthread's thread pool, with every read done by its event loop.

gunicorn's ``gthread`` worker (27.0) hands a new connection to a thread at once: the thread
does a blocking TLS handshake and reads the request head and body with no deadline, waiting
up to 5 s (``DEFAULT_WORKER_DATA_TIMEOUT``) for the first byte before handing it back. 16
clients that complete a handshake and send nothing hold all 2 x 8 threads, and a review
waits behind them. gunicorn has no setting for a read deadline.

``WebhookWorker`` keeps gthread's loop, pool, keep-alive handling and error answers, and
changes where a request is read: the loop does the handshake and receives the whole request
without blocking (``connection.Connection``), each phase under its own deadline, and a
thread gets the connection only when there is nothing left to wait for. The thread then runs
gthread's own ``handle`` with a stand-in parser (``Received``) that yields that request, so
parse errors, logging and keep-alive stay gunicorn's. Kept-alive connections wait in the
loop's poller as in gthread, for the 120 s the apiserver's connection pool needs.

A proxy in front (nginx, Envoy) would give the same deadlines but a second process and
image in the Pod, a second TLS configuration to keep in step with certificate rotation and
``--client-ca``, and a second hop; the reads are a few hundred lines on gunicorn's own parser.
"""

from __future__ import annotations

import errno
import io
import selectors
import socket
import time
from collections import deque
from concurrent.futures import Future
from functools import partial
from typing import Any

from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.http.errors import ChunkMissingTerminator, NoMoreData
from gunicorn.workers.gthread import STOP_KEEPALIVE_LINGER, ThreadWorker

from webhook.server.limits import Limits

from .connection import BodyBudget, Connection, Step

# How often the loop looks for connections past their deadline (gthread wakes every 1 s).
SWEEP_SECONDS = 0.25
# After SIGTERM a worker first goes lame duck: it keeps accepting and answering, every answer
# with `Connection: close` so that the client dials again and finds the endpoints of the
# moment, until no request has come for LAME_DUCK_QUIET_SECONDS; only then does gunicorn's
# graceful stop close its listener. A replica still listed somewhere after SIGTERM (endpoint
# removal slower than the preStop pause) is called on instead of refusing the apiserver,
# which fails the call open (docs/RELIABILITY.md, rolling restart). A worker idle that long
# stops at once. Bounded, so that it fits in gunicorn's graceful timeout (30 s, master.py)
# with the reviews it accepted last.
LAME_DUCK_QUIET_SECONDS = 2.0
LAME_DUCK_MAX_SECONDS = 10.0
_EVENTS = {Step.READ: selectors.EVENT_READ, Step.WRITE: selectors.EVENT_WRITE}


class Received:
    """Stands in for gunicorn's request parser: yields the request the loop received, once.

    gthread's ``handle`` takes the request from ``next(conn.parser)`` and, on keep-alive,
    drains what the app left of the body with ``finish_body``. Here the request is already in
    memory, so ``__next__`` only reads its body out of the inbox (a malformed chunked body
    raises gunicorn's parse error there, which ``handle`` answers with a 400 before the app
    runs) and ``finish_body`` has nothing left to drain.
    """

    def __init__(self, conn: Connection) -> None:
        """Yield ``conn``'s received request."""
        self.conn = conn
        # gthread's finish_request hands a connection straight to a thread when its parser's
        # unreader holds read-ahead; the inbox never does (``gather`` moves it to ``pending``).
        self.unreader = conn.inbox

    def __iter__(self) -> Received:
        """An iterator, as gunicorn's parser is."""
        return self

    def __next__(self) -> Any:
        """The request, its body in memory; raises the framing error the loop found."""
        conn = self.conn
        # handle() has just made the socket blocking: bound each write of the response.
        conn.sock.settimeout(conn.limits.write)
        if conn.error is not None:
            raise conn.error
        request = conn.request
        assert request is not None  # READY without an error: the head was parsed
        reader = request.body.reader
        if isinstance(reader, LengthReader) and reader.length <= conn.limits.max_body:
            # The inbox holds the body (the loop waited for all of it), then anything
            # pipelined: one copy out, where gunicorn's reader would make several.
            request.body = io.BytesIO(conn.inbox.take(reader.length))
        elif isinstance(reader, ChunkedReader):
            try:
                data = request.body.read()
            except NoMoreData as exc:
                # The loop saw the framing end, so the body stopped short of its last chunk.
                raise ChunkMissingTerminator(str(exc)) from exc
            finally:
                conn.inbox.gather()
            request.body = io.BytesIO(data)
        return request

    def finish_body(self, deadline: float | None = None) -> bool:
        """Whether the connection may serve another request: its body is already read."""
        return True


class WebhookWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no types: base is Any
    """gthread with the reads in the event loop (see the module docstring)."""

    alive: bool  # gunicorn's: False once the worker is to stop

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Take the read limits and body permits from the application's settings."""
        super().__init__(*args, **kwargs)
        settings = self.app.settings
        self.limits: Limits = settings.limits
        self.budget = BodyBudget(settings.body_permits)
        self.reading: set[Connection] = set()  # the loop is receiving a request on these
        self.parked: deque[Connection] = deque()  # waiting for a body permit
        self._next_sweep = 0.0
        self.lame_since: float | None = None  # when SIGTERM came (time.monotonic())
        self.last_call = 0.0  # the last connection accepted or request answered

    def handle_exit(self, sig: int, frame: object) -> None:
        """SIGTERM: go lame duck (see LAME_DUCK_QUIET_SECONDS); the loop ends it."""
        if self.lame_since is None:
            self.lame_since = time.monotonic()

    def _end_lame_duck(self, now: float) -> None:
        if self.lame_since is None or not self.alive:
            return
        if now - self.last_call >= LAME_DUCK_QUIET_SECONDS:
            why = f"no request for {LAME_DUCK_QUIET_SECONDS:g} s"
        elif now - self.lame_since >= LAME_DUCK_MAX_SECONDS:
            why = f"{LAME_DUCK_MAX_SECONDS:g} s after SIGTERM"
        else:
            return
        self.log.info("Worker %s stops accepting: %s", self.pid, why)
        self.alive = False  # gunicorn's graceful stop: no new connection, drain the others

    def handle_request(self, req: Any, conn: Connection) -> Any:
        """gthread's, with `Connection: close` on every answer of a lame duck."""
        self.last_call = time.monotonic()
        if self.lame_since is not None:
            req.force_close()
        return super().handle_request(req, conn)

    def accept(self, listener: socket.socket) -> None:
        """Accept a connection and start reading it in the loop (never in a thread)."""
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        try:
            conn = Connection(
                self.cfg, sock, client, listener.getsockname(), self.limits, self.budget
            )
        except OSError:
            # The client reset before TLS could wrap the socket (ENOTCONN).
            sock.close()
            return
        self.nr_conns += 1
        self.last_call = time.monotonic()
        conn.parser = Received(conn)
        self._read(conn)

    def _read(self, conn: Connection) -> None:
        self.reading.add(conn)
        self._advance(conn)

    def _advance(self, conn: Connection, _fileobj: object = None) -> None:
        """Let ``conn`` read what it can, then wait, dispatch or close as it says."""
        step = conn.advance()
        if step in _EVENTS:
            self._watch(conn, _EVENTS[step])
            return
        self._unwatch(conn)
        if step is Step.READY:
            self.reading.discard(conn)
            self.enqueue_req(conn)
        elif step is Step.PARKED:
            self.parked.append(conn)
        else:
            self._drop(conn)

    def _watch(self, conn: Connection, events: int) -> None:
        if conn.watched == events:
            return
        callback = partial(self._advance, conn)
        if conn.watched:
            self.poller.modify(conn.sock, events, callback)
        else:
            self.poller.register(conn.sock, events, callback)
        conn.watched = events

    def _unwatch(self, conn: Connection) -> None:
        if conn.watched:
            self.poller.unregister(conn.sock)
            conn.watched = 0

    def _drop(self, conn: Connection, expired: bool = False) -> None:
        self._unwatch(conn)
        self.reading.discard(conn)
        if conn in self.parked:
            self.parked.remove(conn)
        self.nr_conns -= 1
        if expired:
            conn.expire()
        else:
            conn.end_request()
            conn.close()
        self._resume_parked()

    def _resume_parked(self) -> None:
        while self.parked and self.budget.free:
            self._advance(self.parked.popleft())

    def on_client_socket_readable(self, conn: Connection, client: object) -> None:
        """A kept-alive connection has bytes again: read its next request in the loop."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        conn.watched = 0
        conn.expect_request()
        self._read(conn)

    def murder_pending(self) -> None:
        """Close connections past a read deadline (a started request gets a 408 first); end
        the lame duck once it is over (the loop runs this at least once a second)."""
        now = time.monotonic()
        self._end_lame_duck(now)
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_SECONDS
        if not self.alive:
            # Stopping: a connection idle since its handshake waits no longer than gthread
            # keeps a kept-alive one (``run``'s ``_cap_keepalive``).
            for conn in self.reading:
                if conn.idle:
                    conn.deadline = min(conn.deadline, now + STOP_KEEPALIVE_LINGER)
        for conn in [c for c in self.reading if c.deadline <= now]:
            self._drop(conn, expired=True)

    def finish_request(self, conn: Connection, fs: Future[Any]) -> None:
        """A thread answered: keep the connection for its next request, or close it."""
        conn.end_request()
        try:
            keep = bool(fs.result()) if not fs.cancelled() else False
        except Exception:
            keep = False
        if not keep:
            # gthread closes with a blocking linger of up to 2 s in this loop; the linger is
            # one more read phase here, so a client that keeps its end open blocks nothing.
            conn.linger()
            self._read(conn)
        elif conn.inbox.pending:
            # Pipelined bytes are already here: the socket may never become readable again.
            conn.sock.setblocking(False)
            conn.expect_request()
            self._read(conn)
        else:
            super().finish_request(conn, fs)
        self._resume_parked()
