"""Idle connections are the client's to close (1 worker x 2 threads, 0.5 s read deadlines).

The apiserver's webhook client (Go's http.Transport) keeps idle connections 90 s, and keeps
in that pool, unused, a connection it dialed for a call another connection then served. If
the server closed such a connection first, a review sent on it as it closes fails
(`write: broken pipe`: Go does not retry a POST it began to write), and lwgpu-mutate fails
open. So a connection waits for its next request, or for its first one after the TLS
handshake, as long as a kept-alive one (120 s), and a request's head deadline runs from its
first byte (webhook/server/limits.py, `Limits.idle`). The deadlines still cut off a client
that stops inside a handshake or a request (tests/server/test_hostile.py).

Waiting is on the socket (a blocking read with a timeout), never a sleep.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import ssl
import time

import orjson
import pytest

from tests.support.builders import admission_review, gpu_pod
from tests.support.paths import SHIPPED_POLICY
from tools.loopback.https_client import JSON, raw_request, read_response
from tools.loopback.server import serving
from tools.waiting import wait_for

REVIEW = orjson.dumps(admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="idle-uid"))
DEADLINE = 0.5  # every read deadline of this module's servers, in seconds
IDLE = 4 * DEADLINE  # longer than any read deadline, far shorter than the idle timeout
DEADLINES = ("--handshake-timeout", "--header-timeout", "--body-timeout")
OPTIONS = {
    "workers": 1,
    "threads": 2,
    "extra_args": tuple(arg for flag in DEADLINES for arg in (flag, str(DEADLINE))),
}


@pytest.fixture(scope="module")
def server_options() -> dict:
    return OPTIONS


def handshaken(server) -> ssl.SSLSocket:
    """A new connection, its TLS handshake done, nothing sent."""
    context = ssl.create_default_context(cafile=str(server.ca))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return context.wrap_socket(sock, server_hostname="localhost")


def still_open_after(sock: ssl.SSLSocket, seconds: float) -> bool:
    """True when the server neither closed nor wrote to `sock` for `seconds`."""
    sock.settimeout(seconds)
    try:
        sock.recv(1)  # b"": closed; anything else: written to
        return False
    except TimeoutError:
        return True
    except (ConnectionResetError, ssl.SSLError):
        return False
    finally:
        sock.settimeout(10)


def review_on(sock: ssl.SSLSocket) -> tuple[int, dict]:
    sock.sendall(raw_request("POST", "/mutate", [JSON, f"Content-Length: {len(REVIEW)}"], REVIEW))
    response = read_response(sock)
    return response.status, orjson.loads(response.data)


def test_a_connection_silent_since_its_handshake_is_still_served_after_the_deadlines(server):
    # Before the fix the server closed it at the head deadline (0.5 s here, 3 s as shipped),
    # while the apiserver could still pick it from its pool for a review.
    with contextlib.closing(handshaken(server)) as sock:
        assert still_open_after(sock, IDLE)
        status, answer = review_on(sock)
    assert status == 200 and answer["response"]["uid"] == "idle-uid"


def test_a_kept_alive_connection_idle_past_the_deadlines_is_served_again(server):
    with contextlib.closing(handshaken(server)) as sock:
        first, _ = review_on(sock)
        assert still_open_after(sock, IDLE)
        second, answer = review_on(sock)
    assert (first, second) == (200, 200) and answer["response"]["uid"] == "idle-uid"


def test_after_an_idle_wait_the_head_deadline_runs_from_the_first_byte(server):
    with contextlib.closing(handshaken(server)) as sock:
        assert still_open_after(sock, IDLE)
        sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: lwgpu-webhook\r\n")  # and stalls
        began = time.monotonic()
        response = read_response(sock)
        waited = time.monotonic() - began
    assert response.status == 408
    assert waited < IDLE  # the head's own deadline, not the idle wait's


def test_a_stopping_server_does_not_wait_for_idle_connections(tmp_path):
    # gthread keeps kept-alive connections 2 s after it stops accepting; a connection idle
    # since its handshake is held no longer, so a replica stops long before its grace period.
    with (
        serving(tmp_path, SHIPPED_POLICY, **OPTIONS) as server,
        contextlib.closing(handshaken(server)) as sock,
    ):
        server.process.send_signal(signal.SIGTERM)
        wait_for(
            lambda: b"Handling signal: term" in server.stderr.read_bytes(),
            what="the master's SIGTERM",
        )
        began = time.monotonic()
        code = server.process.wait(30)
        stopped_s = time.monotonic() - began
        closed = not still_open_after(sock, 1)
    assert code == 0 and closed
    assert stopped_s < 15  # the lame duck (2 s quiet) + 2 s, far under the 30 s graceful stop
