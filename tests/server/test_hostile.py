"""A misbehaving client on the pod network, against the real server (1 worker x 2 threads).

Each test is the fast, deterministic half of an attack in tools/reliability/attacks.py:
connections that stall at every phase of a request must not keep a review from being
answered, a stalled request is cut off at its deadline (408 once it began), malformed
chunked framing is a 400 with no traceback and no 5xx, and the read deadlines come from
`serve`'s flags. Waiting is on the socket (a blocking read with a timeout), never a sleep.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator

import orjson
import pytest

from tests.support.builders import admission_review, gpu_pod
from tools.loopback.https_client import JSON, raw_request, read_response

REVIEW = orjson.dumps(admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="hostile-uid"))
DEADLINE = 0.5  # every read deadline of this module's server, in seconds


@pytest.fixture(scope="module")
def server_options() -> dict:
    """Two threads in one worker: a handful of stalled clients would hold them all in gthread."""
    deadlines = ("--handshake-timeout", "--header-timeout", "--body-timeout")
    return {
        "workers": 1,
        "threads": 2,
        "extra_args": tuple(arg for flag in deadlines for arg in (flag, str(DEADLINE))),
    }


def tcp(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


@contextlib.contextmanager
def stalled(server, kind: str, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that each stop at one phase of a request, held open."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = tcp(server)
            if kind == "client-hello byte":
                sock.sendall(b"\x16")  # the first byte of a TLS record: a handshake begins
            elif kind != "tcp only":
                context = ssl.create_default_context(cafile=str(server.ca))
                sock = context.wrap_socket(sock, server_hostname="localhost")
                if kind == "partial head":
                    sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: lwgpu-webhook\r\n")
                elif kind == "short body":
                    head = [JSON, f"Content-Length: {len(REVIEW)}"]
                    sock.sendall(raw_request("POST", "/mutate", head) + REVIEW[:100])
            held.append(sock)
        yield held
    finally:
        for sock in held:
            sock.close()


STALLS = ["tcp only", "client-hello byte", "after handshake", "partial head", "short body"]


def test_stalled_connections_of_every_kind_leave_threads_for_a_review(server):
    # gthread (27.0) gives each of these a thread at once, for up to 5 s or without a bound
    # (gunicorn/workers/gthread.py, ThreadWorker.handle and TConn.init): 10 held 2 threads.
    with contextlib.ExitStack() as stack:
        for kind in STALLS:
            stack.enter_context(stalled(server, kind, 8))
        answers = [server.review("/mutate", admission_review(gpu_pod({"aliyun.com/gpu-mem": 2})))]
        answers.append(server.review("/mutate", orjson.loads(REVIEW)))
        status, _ = server.get("/healthz")
    assert [code for code, _ in answers] == [200, 200] and status == 200
    assert answers[1][1]["response"]["uid"] == "hostile-uid"


@pytest.mark.parametrize("kind", ["partial head", "short body"])
def test_a_request_that_began_gets_408_at_its_deadline(server, kind):
    with stalled(server, kind, 1) as (sock,):
        response = read_response(sock)
        assert sock.recv(1) == b""
    assert response.status == 408 and response.getheader("Connection") == "close"
    assert orjson.loads(response.data)["reason"] == "Timeout"


# A connection silent after its handshake is idle, not stalled: it waits as a kept-alive one
# does, for the apiserver's pool (tests/server/test_idle.py).
@pytest.mark.parametrize("kind", ["tcp only", "client-hello byte"])
def test_a_connection_silent_in_its_handshake_is_closed_at_its_deadline(server, kind):
    with stalled(server, kind, 1) as (sock,):
        try:
            closed = sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            closed = True  # TLS cut off mid-handshake
    assert closed


def chunked_request(body: bytes) -> bytes:
    return raw_request("POST", "/mutate", [JSON, "Transfer-Encoding: chunked"], body)


# name, chunked body as sent: each is malformed where gunicorn's ChunkedReader looks
MALFORMED_CHUNKED = [
    ("size not hexadecimal", b"zz\r\n" + REVIEW + b"\r\n0\r\n\r\n"),
    ("size line over the field limit", b"10;" + b"x" * 9000 + b"\r\n" + REVIEW[:16] + b"\r\n"),
    ("no CRLF after the chunk data", b"4\r\n" + REVIEW[:8] + b"\r\n0\r\n\r\n"),
    ("trailer over the field limit", b"4\r\nabcd\r\n0\r\nX-Pad: " + b"x" * 70000 + b"\r\n\r\n"),
]


@pytest.mark.parametrize("name,body", MALFORMED_CHUNKED, ids=[c[0] for c in MALFORMED_CHUNKED])
def test_malformed_chunked_framing_is_a_400(server, name, body):
    with server.raw_socket() as sock:
        sock.sendall(chunked_request(body))
        response = read_response(sock)
    assert response.status == 400, response.data


def test_a_client_gone_mid_body_leaves_no_traceback_and_no_5xx(server):
    with server.raw_socket() as sock:
        sock.sendall(chunked_request(b"%x\r\n" % len(REVIEW) + REVIEW[:50]))
    with server.raw_socket() as sock:  # the server still answers, and its log says why not
        sock.sendall(chunked_request(b"zz\r\n"))
        assert read_response(sock).status == 400
    errors = {
        labels: value
        for (name, labels), value in server.metrics().items()
        if name == "lwgpu_admission_request_errors_total"
    }
    assert not any(dict(labels)["code"].startswith("5") for labels in errors)
    assert "Traceback" not in server.stderr.read_text()


def test_the_startup_log_names_the_address(server):
    log = server.stderr.read_text()
    assert f"listening at https://127.0.0.1:{server.port}" in log
    assert "Listening at:  (" not in log  # gunicorn's line, empty with reuse_port, is dropped
