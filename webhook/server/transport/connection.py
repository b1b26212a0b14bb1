"""One client connection as the worker's event loop sees it: a TLS handshake and a request read
without ever blocking, each under its own deadline.

A thread gets the connection only once a whole request is in memory (``Step.READY``): a client
that is slow to shake hands, to send its head or its body holds a file descriptor and a few
bytes, never a thread. gunicorn's ``Request`` parses the head (so every header rule is
gunicorn's) and later reads the body from the same ``Inbox``; ``framing`` only says when the
request is complete.
"""

from __future__ import annotations

import contextlib
import enum
import os
import socket
import ssl
import time
from typing import Any

from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.http.errors import LimitRequestHeaders
from gunicorn.http.message import Request
from gunicorn.http.unreader import Unreader
from gunicorn.sock import ssl_wrap_socket
from gunicorn.workers.gthread import TConn

from webhook.admission import encode, errored
from webhook.server.limits import Limits

from .framing import ChunkedEnd, head_length

RECV_BYTES = 256 * 1024
# After the last response, what the client still sends is read and dropped for this long,
# or up to LINGER_BYTES: closing with unread bytes would make the kernel answer RST, and the
# client could lose the response (RFC 9112 section 9.6; gunicorn's util.close_graceful).
LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024
# A request head larger than this is refused (431) without waiting for its end. gunicorn's
# own limits (request line 4094 bytes, 100 fields of 8190) allow ~800 KiB; the apiserver
# sends well under 2 KiB.
HEAD_LIMIT = 64 * 1024
# Bodies up to this size are read without asking the worker's budget (see ``BodyBudget``).
SMALL_BODY = 256 * 1024
# What a client whose request began gets at a read deadline, before the connection closes:
# a Status like every other error answer of the server.
_TIMEOUT_STATUS = encode(errored(408, "request not received in time"))
TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_TIMEOUT_STATUS), _TIMEOUT_STATUS)
)
# Go's net/http answers plain HTTP on a TLS port the same way (server.go, serve()).
PLAIN_HTTP_ANSWER = (
    b"HTTP/1.0 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n"
    b"Client sent an HTTP request to an HTTPS server.\n"
)


class Step(enum.Enum):
    """What a connection needs next from the event loop."""

    READ = "read"  # wait until the socket is readable
    WRITE = "write"  # wait until it is writable (TLS may need to send during a read)
    READY = "ready"  # a whole request (or a framing error) is ready for a thread
    PARKED = "parked"  # a large body waits for the worker's body budget
    CLOSE = "close"  # the client left, or the handshake failed


class Phase(enum.Enum):
    """Which part of the exchange the connection is in; each has its own deadline."""

    HANDSHAKE = "handshake"
    HEAD = "head"
    BODY = "body"
    SERVING = "serving"
    LINGER = "linger"  # answered; reading what the client still sends until it closes


class Inbox(Unreader):  # type: ignore[misc]  # gunicorn has no types: base is Any
    """Bytes received and not yet consumed by the request's parser; reading it never blocks."""

    def __init__(self) -> None:
        """Start empty."""
        super().__init__()
        self.pending = bytearray()

    def chunk(self, size_hint: int | None = None) -> bytes:
        """Everything received so far (gunicorn's parser asks for more until it has enough)."""
        data = bytes(self.pending)
        self.pending.clear()
        return data

    def take(self, size: int) -> bytes:
        """The first ``size`` bytes of ``pending``, removed from it; the rest is kept in a
        new buffer, so the inbox never holds on to the allocation of a large body."""
        with memoryview(self.pending) as view:
            data, rest = bytes(view[:size]), bytearray(view[size:])
        self.pending = rest
        return data

    def gather(self) -> None:
        """Put the read-ahead the parser handed back in front of ``pending``, so ``pending``
        starts where the parser stopped."""
        rest = self.take_buffered()
        if rest:
            self.pending[:0] = rest


class BodyBudget:
    """How many requests with a body over ``SMALL_BODY`` one worker holds at once.

    A connection takes a permit before reading past ``SMALL_BODY`` and gives it back once its
    request was answered, so a worker holds at most ``permits`` large bodies (received or
    being reviewed), whatever clients send. Used by the event loop only: no lock.
    """

    def __init__(self, permits: int) -> None:
        """Allow ``permits`` large bodies at a time."""
        self.free = permits

    def take(self) -> bool:
        """Take a permit if one is free."""
        if self.free == 0:
            return False
        self.free -= 1
        return True

    def give(self) -> None:
        """Return a permit."""
        self.free += 1


class Connection(TConn):  # type: ignore[misc]  # gunicorn has no types: base is Any
    """A connection accepted by the worker, read by its event loop until a request is whole."""

    def __init__(
        self,
        cfg: Any,
        sock: socket.socket,
        client: Any,
        server: Any,
        limits: Limits,
        budget: BodyBudget,
    ) -> None:
        """Wrap ``sock`` for TLS (the handshake happens in ``advance``) and start its clock."""
        super().__init__(cfg, sock, client, server)
        self.sock: socket.socket = ssl_wrap_socket(sock, cfg) if cfg.is_ssl else sock
        # gunicorn's TConn.init() would do a blocking handshake in a thread: never call it.
        self.initialized = True
        self.limits, self.budget = limits, budget
        self.inbox = Inbox()
        self.request: Request | None = None
        self.error: Exception | None = None
        self.holds_budget = False
        self.requests = 0
        self.watched = 0  # the selector events the worker's poller waits for on this socket
        self.idle = False  # waiting for a request of which no byte has come (``Limits.idle``)
        self._lingered = 0
        self.phase = Phase.HANDSHAKE if cfg.is_ssl else Phase.HEAD
        self.deadline = time.monotonic() + (limits.handshake if cfg.is_ssl else limits.head)
        self._searched = 0
        self._need: int | None = None
        self._chunked: ChunkedEnd | None = None

    def expect_request(self, idle: bool = False) -> None:
        """Start the clock for the next request's head: at once (its bytes are coming), or,
        ``idle``, only at its first byte, the connection waiting meanwhile as a kept-alive one
        waits (after the handshake: see ``Limits.idle``)."""
        self.phase, self.idle = Phase.HEAD, idle
        self.deadline = time.monotonic() + (self.limits.idle if idle else self.limits.head)
        self.request, self.error = None, None
        self._searched, self._need, self._chunked = 0, None, None

    @property
    def started(self) -> bool:
        """Whether any byte of the current request has arrived."""
        return bool(self.inbox.pending) or self.phase is Phase.BODY

    def advance(self) -> Step:
        """Do whatever the socket allows now without blocking, and say what comes next."""
        if self.phase is Phase.LINGER:
            return self._drain()
        if self.phase is Phase.HANDSHAKE:
            step = self._handshake()
            if step is not None:
                return step
            self.expect_request(idle=True)
        while True:
            step = self._frame()
            if step is not None:
                return step
            step = self._receive()
            if step is not None:
                return step

    def _handshake(self) -> Step | None:
        assert isinstance(self.sock, ssl.SSLSocket)  # the HANDSHAKE phase is for TLS only
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            return Step.READ
        except ssl.SSLWantWriteError:
            return Step.WRITE
        except ssl.SSLError as exc:
            if exc.reason == "HTTP_REQUEST":
                self._send_raw(PLAIN_HTTP_ANSWER)
            return Step.CLOSE
        except OSError:
            return Step.CLOSE
        return None

    def _receive(self) -> Step | None:
        """One read into the inbox; None when bytes arrived (frame them), else the wait."""
        if not self.holds_budget and len(self.inbox.pending) >= SMALL_BODY:
            if not self.budget.take():
                return Step.PARKED
            self.holds_budget = True
        try:
            data = self.sock.recv(RECV_BYTES)
        except (ssl.SSLWantReadError, BlockingIOError):
            return Step.READ
        except ssl.SSLWantWriteError:
            return Step.WRITE
        except OSError:
            return Step.CLOSE
        if not data:
            return Step.CLOSE
        if self.idle:  # the request began: its head has `head` seconds from now
            self.idle, self.deadline = False, time.monotonic() + self.limits.head
        self.inbox.pending += data
        return None

    def _frame(self) -> Step | None:
        """READY when the inbox holds the whole request; None when more bytes are needed."""
        pending = self.inbox.pending
        if self.phase is Phase.HEAD:
            end = head_length(pending, self._searched)
            self._searched = len(pending)
            if not end:
                if len(pending) > HEAD_LIMIT:
                    return self._ready(LimitRequestHeaders(f"request head over {HEAD_LIMIT} bytes"))
                return None
            step = self._parse_head()
            if step is not None:
                return step
        if self.phase is Phase.BODY:
            if self._chunked is not None:
                done = self._chunked.scan(pending) or len(pending) > 2 * self.limits.max_body
            else:
                assert self._need is not None
                done = len(pending) >= self._need
            return self._ready() if done else None
        return Step.READY

    def _parse_head(self) -> Step | None:
        self.requests += 1
        try:
            self.request = Request(self.cfg, self.inbox, self.client, self.requests)
        except Exception as exc:  # gunicorn's parse errors; handle_error answers 400/431/...
            return self._ready(exc)
        self.inbox.gather()
        self.phase, self.deadline = Phase.BODY, time.monotonic() + self.limits.body
        reader = self.request.body.reader
        if isinstance(reader, ChunkedReader):
            self._chunked = ChunkedEnd(limit=self.request.limit_request_field_size)
        elif isinstance(reader, LengthReader) and reader.length <= self.limits.max_body:
            self._need = reader.length
        else:
            # Over the cap: the app answers 413 from Content-Length without reading the body.
            return self._ready()
        if self.request.headers and ("EXPECT", "100-continue") in (
            (name, value.lower()) for name, value in self.request.headers
        ):
            # The client waits for this before sending its body (RFC 9110 section 10.1.1).
            self._send_raw(b"HTTP/1.1 100 Continue\r\n\r\n")
        return None

    def _ready(self, error: Exception | None = None) -> Step:
        self.error = error
        self.phase = Phase.SERVING
        return Step.READY

    def linger(self) -> None:
        """Half-close after the last response, then drain (``advance``) until the client closes."""
        self.phase, self.deadline = Phase.LINGER, time.monotonic() + LINGER_SECONDS
        try:
            self.sock.setblocking(False)
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            # Already closed by gunicorn (a TLS EOF) or reset by the client: nothing to drain.
            self._lingered = LINGER_BYTES

    def _drain(self) -> Step:
        while self._lingered < LINGER_BYTES:
            try:
                data = self.sock.recv(RECV_BYTES)
            except (BlockingIOError, ssl.SSLWantReadError):
                return Step.READ
            except (OSError, ValueError):
                break
            if not data:
                break
            self._lingered += len(data)
        return Step.CLOSE

    def end_request(self) -> None:
        """The request was answered: drop it (a kept-alive connection must not hold its body)
        and give back the body budget it held."""
        self.request = None
        if self.holds_budget:
            self.holds_budget = False
            self.budget.give()

    def expire(self) -> None:
        """Close on a passed deadline; a started request gets a 408 first (best effort)."""
        if self.phase in (Phase.HEAD, Phase.BODY) and self.started:
            self._send(TIMEOUT_ANSWER)
        self.end_request()
        self.close()

    def _send(self, data: bytes) -> None:
        # From the event loop: never wait; a client that does not read loses the message.
        with contextlib.suppress(OSError, ValueError):
            self.sock.send(data)

    def _send_raw(self, data: bytes) -> None:
        # Below TLS: for a client that spoke plain HTTP, and for interim responses before TLS
        # is involved (plain sockets). On a TLS socket after the handshake, send through TLS.
        if self.phase is Phase.HANDSHAKE:
            with contextlib.suppress(OSError):
                os.write(self.sock.fileno(), data)
        else:
            self._send(data)
