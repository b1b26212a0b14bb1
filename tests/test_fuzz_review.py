"""Mutated AdmissionReviews against the response builder in-process and a real server over HTTPS.

Thousands of bodies, broken the way `tests/reliability/mutate.py` describes (missing and extra
keys, wrong types, nulls, huge numbers, unicode, 100 KB strings, deep nesting, keys with `/`
and `~`, corrupted bytes). In-process, `admission.review` answers a well-formed response or
raises `BadReview`, nothing else. Over HTTPS, every answer is a 200 AdmissionReview that
echoes the uid, or a 4xx with a JSON `Status`; never a 5xx or a hang, and the same workers are
alive afterwards. Each test prints a summary line with its counts. The examples are
derandomized so that CI runs the same bodies every time.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import socket
import string

import jsonpatch
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import admission_review, container, default_policies, pod, workload
from tests.reliability import procfs
from tests.reliability.mutate import FUZZ, corrupted, mutated, nest, print_counts
from tests.server_harness import REPO, Connection, client_context, serving
from webhook.admission import API_VERSION, KIND, BadReview, encode, review
from webhook.decision import WARNING_LIMIT

# A denial is read by a person in kubectl's output: it names fields and values, shortened.
MESSAGE_LIMIT = 1024
DECISIONS = {"skipped", "allowed", "mutated", "denied"}
SELECTOR = {"aliyun.accelerator/nvidia_mem": "2048MiB"}


def _bases() -> list[dict]:
    """Valid reviews that reach every branch: rewrite, pinned, annotation, sidecar, workloads."""
    sidecar = container("proxy", limits={"nvidia.com/gpumem": 1024}, restartPolicy="Always")
    pods = [
        pod(),
        pod(container(limits={"nvidia.com/gpu": "1"}), node_selector=SELECTOR),
        pod(
            container("a"),
            container(
                "b", limits={"nvidia.com/gpumem": 3000}, requests={"nvidia.com/gpumem": "3000"}
            ),
        ),
        pod(container(), annotations={"lwgpu.io/gpu-memory": "1536Mi"}),
        pod(container(limits={"aliyun.com/gpu-mem": 1}), init=(sidecar,), node_selector={}),
        pod(container(limits={"aliyun.com/gpu-mem": 9})),
    ]
    objects = [
        *pods,
        workload("apps/v1", "Deployment", pods[0]),
        workload("batch/v1", "CronJob", pods[2]),
    ]
    reviews = [admission_review(o, uid=f"fuzz-{i}") for i, o in enumerate(objects)]
    reviews.append(admission_review(objects[-2], operation="UPDATE", uid="fuzz-update"))
    return reviews


BASES = _bases()


def check_in_process(body: object, mutate: bool) -> str:
    """Review `body`; assert the answer is well-formed. Returns its decision or `400`."""
    try:
        result = review(body, default_policies(), mutate=mutate)
    except BadReview as exc:
        assert 0 < len(str(exc)) <= MESSAGE_LIMIT
        return "400"
    request = body["request"]
    assert result.response.keys() == {"apiVersion", "kind", "response"}
    assert (result.response["apiVersion"], result.response["kind"]) == (API_VERSION, KIND)
    answer = result.response["response"]
    assert answer["uid"] == request["uid"] == result.uid
    assert answer["allowed"] is (result.decision != "denied")
    assert result.decision in DECISIONS
    assert all(isinstance(w, str) and len(w) <= WARNING_LIMIT for w in answer.get("warnings", []))
    if result.decision == "denied":
        assert answer["status"]["code"] == 403
        assert 0 < len(answer["status"]["message"]) <= MESSAGE_LIMIT
    if "patch" in answer:
        assert mutate and answer["patchType"] == "JSONPatch"
        ops = orjson.loads(base64.b64decode(answer["patch"]))
        patched = jsonpatch.apply_patch(request["object"], ops)
        assert json.dumps(patched, sort_keys=True) == json.dumps(result.decided.obj, sort_keys=True)
        again = review({**body, "request": {**request, "object": patched}}, default_policies())
        assert "patch" not in again.response["response"], "a rewritten object must stay put"
    with contextlib.suppress(orjson.JSONEncodeError):
        orjson.dumps(body)  # only a body that could arrive as JSON must encode (no 2**70 uids)
        encode(result.response)
    return result.decision


def test_mutated_reviews_in_process(capsys):
    counts: collections.Counter = collections.Counter()

    @settings(FUZZ, max_examples=2000)
    @given(body=mutated(BASES), mutate=st.booleans())
    def check(body, mutate):
        counts[check_in_process(body, mutate)] += 1

    check()
    print_counts(capsys, "in-process review fuzz", counts)
    # The generator must reach refusals of the envelope and every decision, or it tests little.
    assert counts.keys() == {"400", *DECISIONS} and sum(counts.values()) >= 2000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(
        tmp_path_factory.mktemp("fuzz"), REPO / "policies" / "default.yaml", workers=2, threads=4
    ) as running:
        yield running


class NoDelayConnection(Connection):
    """The harness's connection with TCP_NODELAY, as the apiserver's Go client dials.

    http.client writes headers and body in two sends; with Nagle on, the second waits for
    the server's delayed ACK, 40 ms per request on loopback instead of about 2 ms.
    """

    def connect(self) -> None:
        """Connect as the harness does, then turn Nagle off."""
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _connect(server) -> NoDelayConnection:
    return NoDelayConnection(server.port, client_context(server.ca))


def _wire(body: object, ascii_only: bool) -> bytes:
    # The stdlib encoder writes what orjson refuses (2**70, NaN, lone surrogates), so the
    # server's own parser meets them.
    return json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


# Drawn twice as often as a byte-level corruption (see the test): most corrupted bytes are
# refused by the JSON parser, structural mutations reach the decision.
WIRE_REVIEWS = st.builds(_wire, mutated(BASES), st.booleans())


def check_over_https(conn, data: bytes) -> str:
    """POST `data` to /mutate; assert a 200 review or a 4xx Status. Returns the status code."""
    status, headers, answer = conn.call(
        "POST", "/mutate", data, {"Content-Type": "application/json"}
    )
    assert status < 500, answer[:2000]
    assert headers["Content-Type"] == "application/json"
    parsed = orjson.loads(answer)
    if status == 200:
        expected = review(orjson.loads(data), default_policies())
        assert parsed == expected.response, "the server answers what admission.review builds"
    else:
        assert 400 <= status < 500 and parsed["kind"] == "Status" and parsed["code"] == status
    if headers.get("Connection", "").lower() == "close":
        conn.close()  # the next request opens a new connection
    return str(status)


def test_mutated_reviews_over_https(server, capsys):
    counts: collections.Counter = collections.Counter()
    workers = procfs.children(server.process.pid)
    valid = [_wire(b, True) for b in BASES]
    with contextlib.closing(_connect(server)) as conn:

        @settings(FUZZ, max_examples=1000)
        @given(
            data=st.one_of(WIRE_REVIEWS, WIRE_REVIEWS, st.sampled_from(valid).flatmap(corrupted))
        )
        def check(data):
            counts[check_over_https(conn, data)] += 1

        check()
    print_counts(capsys, "HTTPS review fuzz", counts)
    assert counts.keys() == {"200", "400"} and sum(counts.values()) >= 1000
    assert server.get("/healthz")[0] == 200
    assert len(workers) == 2 and procfs.children(server.process.pid) == workers


# name, body bytes, expected status: extremes the generator reaches rarely or never.
EXTREMES = [
    ("nested-5000-deep", b'{"a":' * 5000 + b"1" + b"}" * 5000, 400),
    ("spec-field-nested-240-deep", _wire(admission_review(pod(extra=nest(240, 1))), True), 200),
    ("uid-2**70", _wire(BASES[0] | {"request": BASES[0]["request"] | {"uid": 2**70}}, True), 400),
    # orjson reads integers beyond 64 bits as floats: the quantity is out of range, a denial.
    (
        "gpu-mem-2**70",
        _wire(admission_review(pod(container(limits={"aliyun.com/gpu-mem": 2**70}))), True),
        200,
    ),
    (
        "nan-quantity",
        _wire(admission_review(pod(container(limits={"aliyun.com/gpu-mem": float("nan")}))), True),
        400,
    ),
    ("lone-surrogate", _wire(admission_review(pod(container("\ud800"))), False), 400),
    (
        "nul-in-uid",
        _wire(BASES[0] | {"request": BASES[0]["request"] | {"uid": "a\x00b"}}, True),
        200,
    ),
    (
        "100k-names",
        _wire(
            admission_review(
                pod(container(string.ascii_letters * 2000, limits={"aliyun.com/gpu-mem": 2}))
            ),
            True,
        ),
        200,
    ),
    (
        "6-mib-annotation",
        _wire(admission_review(pod(annotations={"x": "y" * (6 << 20)})), True),
        200,
    ),
    ("body-is-array", b"[" + _wire(BASES[0], True) + b"]", 400),
    ("body-is-null", b"null", 400),
]


@pytest.mark.parametrize("name,data,code", EXTREMES, ids=[e[0] for e in EXTREMES])
def test_extreme_bodies_over_https(server, name, data, code):
    with contextlib.closing(_connect(server)) as conn:
        assert check_over_https(conn, data) == str(code)
    assert server.get("/healthz")[0] == 200
