"""Edge checks before any decision: golden JSON bodies for every 4xx, the early 413, the 500.

Requests are written byte by byte on a verified TLS socket, so a test controls exactly what
the server sees (no Content-Length, chunked bodies, a body still being sent).
Regenerate the golden files with LWGPU_UPDATE_GOLDEN=1 after an intended message change.
"""

from __future__ import annotations

import types

import orjson
import pytest

from tests.support.builders import admission_review, gpu_pod
from tests.support.golden import check_golden_json
from tests.support.paths import GOLDEN
from tools.loopback.https_client import JSON, raw_request, read_response
from webhook.server.app.wsgi import create_app
from webhook.server.limits import MAX_BODY_BYTES, MAX_JSON_CONTAINERS

REVIEW = orjson.dumps(admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="edge-uid"))
# One object more than MAX_JSON_CONTAINERS, as empty init containers: refused unparsed.
DENSE_POD = gpu_pod({"aliyun.com/gpu-mem": 2})
DENSE_POD["spec"]["initContainers"] = [{}] * (MAX_JSON_CONTAINERS - REVIEW.count(b"{") + 1)
DENSE = orjson.dumps(admission_review(DENSE_POD, uid="edge-uid"))
# A uid no apiserver sends: refused, and not echoed in the answer's details.
LONG_UID = orjson.dumps(admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="u" * 100_000))


def chunked(data: bytes, size: int = 1 << 20) -> bytes:
    chunks = [
        b"%x\r\n%s\r\n" % (len(data[i : i + size]), data[i : i + size])
        for i in range(0, len(data), size)
    ]
    return b"".join(chunks) + b"0\r\n\r\n"


def with_length(body: bytes) -> list[str]:
    return [JSON, f"Content-Length: {len(body)}"]


# golden name, expected status, raw request
EDGE_CASES = [
    (
        "wrong-content-type",
        415,
        raw_request(
            "POST",
            "/mutate",
            ["Content-Type: text/plain", f"Content-Length: {len(REVIEW)}"],
            REVIEW,
        ),
    ),
    (
        "no-content-type",
        415,
        raw_request("POST", "/validate", [f"Content-Length: {len(REVIEW)}"], REVIEW),
    ),
    (
        "too-large-declared",
        413,
        raw_request("POST", "/mutate", [JSON, f"Content-Length: {MAX_BODY_BYTES + 1}"]),
    ),
    (
        "too-large-chunked",
        413,
        raw_request(
            "POST",
            "/mutate",
            [JSON, "Transfer-Encoding: chunked"],
            chunked(b" " * (MAX_BODY_BYTES + 1)),
        ),
    ),
    ("no-content-length", 400, raw_request("POST", "/mutate", [JSON])),
    ("empty-body", 400, raw_request("POST", "/mutate", with_length(b""))),
    (
        "malformed-json",
        400,
        raw_request("POST", "/mutate", with_length(b'{"apiVersion": "adm'), b'{"apiVersion": "adm'),
    ),
    (
        "not-utf8",
        400,
        raw_request("POST", "/mutate", with_length(b'{"a": "\xff"}'), b'{"a": "\xff"}'),
    ),
    (
        "pod-not-review",
        400,
        raw_request(
            "POST", "/mutate", with_length(orjson.dumps(gpu_pod({}))), orjson.dumps(gpu_pod({}))
        ),
    ),
    (
        "review-v1beta1",
        400,
        raw_request(
            "POST",
            "/validate",
            with_length(REVIEW.replace(b"admission.k8s.io/v1", b"admission.k8s.io/v1beta1")),
            REVIEW.replace(b"admission.k8s.io/v1", b"admission.k8s.io/v1beta1"),
        ),
    ),
    (
        "uid-too-long",
        400,
        raw_request("POST", "/mutate", with_length(LONG_UID), LONG_UID),
    ),
    (
        "too-many-json-containers",
        413,
        raw_request("POST", "/mutate", with_length(DENSE), DENSE),
    ),
    ("get-mutate", 405, raw_request("GET", "/mutate", [])),
    ("unknown-path", 404, raw_request("POST", "/admit", with_length(REVIEW), REVIEW)),
]


@pytest.mark.parametrize("name,code,request_bytes", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_error_bodies_match_golden(server, name, code, request_bytes):
    with server.raw_socket() as sock:
        sock.sendall(request_bytes)
        response = read_response(sock)
    assert response.status == code
    assert response.getheader("Content-Type") == "application/json"
    check_golden_json(GOLDEN / "server" / f"{name}.json", response.data)


def test_413_arrives_while_the_client_is_still_sending(server):
    declared = 4 * MAX_BODY_BYTES
    # Less than gunicorn's lingering-close drain (64 KiB), so the close is a clean FIN.
    first_part = REVIEW[:-1] + b" " * 16384
    with server.raw_socket() as sock:
        sock.sendall(
            raw_request("POST", "/mutate", [JSON, f"Content-Length: {declared}"]) + first_part
        )
        # Nothing more is sent: the answer must come without the server waiting for the body.
        response = read_response(sock)
        assert sock.recv(1) == b""
    assert response.status == 413 and len(first_part) < declared
    # Announced before the body was read: the server closes rather than drain 28 MiB to keep it.
    assert response.getheader("Connection") == "close"
    check_golden_json(GOLDEN / "server" / "too-large-streaming.json", response.data)


def test_the_connection_survives_a_400(server):
    bad = b'{"apiVersion": '
    with server.raw_socket() as sock:
        sock.sendall(raw_request("POST", "/mutate", with_length(bad), bad))
        first = read_response(sock)
        sock.sendall(raw_request("POST", "/mutate", with_length(REVIEW), REVIEW))
        second = read_response(sock)
    assert (first.status, second.status) == (400, 200)
    assert orjson.loads(second.data)["response"]["uid"] == "edge-uid"


def test_unexpected_exception_is_a_500_naming_the_uid(capfd):
    # A policy holder whose policy set is not one: the decision raises inside review().
    broken = types.SimpleNamespace(current=object(), path="broken", error=None, generation=1)
    client = create_app(broken).test_client()
    response = client.post("/mutate", data=REVIEW, content_type="application/json")
    assert response.status_code == 500
    assert response.get_json() == {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": 500,
        "reason": "InternalError",
        "message": "internal error while reviewing edge-uid: AttributeError",
        "details": {"uid": "edge-uid"},
    }
    line = orjson.loads(capfd.readouterr().out.splitlines()[-1])
    assert (line["uid"], line["status"], line["decision"]) == ("edge-uid", 500, "error")


def test_no_policy_yet_is_a_503_naming_the_uid(tmp_path, capfd):
    waiting = types.SimpleNamespace(
        current=None, path=tmp_path / "p.yaml", error="no such file", generation=0
    )
    client = create_app(waiting).test_client()
    response = client.post("/validate", data=REVIEW, content_type="application/json")
    ready = client.get("/readyz")
    assert response.status_code == 503 and response.get_json()["details"] == {"uid": "edge-uid"}
    assert ready.status_code == 503 and "no such file" in ready.get_json()["problems"][0]
    assert orjson.loads(capfd.readouterr().out.splitlines()[-1])["status"] == 503


def test_review_paths_answer_options_and_refuse_other_methods():
    # The review endpoint runs in front of Flask; it keeps what Flask answered on its paths.
    client = create_app(types.SimpleNamespace(current=None, path="p", error="", generation=0))
    options = client.test_client().options("/validate")
    head = client.test_client().head("/mutate")
    assert options.status_code == 200 and options.headers["Allow"] == "OPTIONS, POST"
    assert head.status_code == 405 and head.headers["Allow"] == "OPTIONS, POST"
