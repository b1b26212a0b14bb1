"""Mutated AdmissionReviews against the response builder in-process and a real server over HTTPS.

Thousands of bodies, broken the way `tests/support/mutate.py` describes (missing and extra
keys, wrong types, nulls, huge numbers, unicode, 100 KB strings, deep nesting, keys with `/`
and `~`, corrupted bytes). In-process, `admission.parse_request` refuses a body with
`BadReview` or `admission.review` answers it with a well-formed response, nothing else.
Over HTTPS, every answer is a 200 AdmissionReview that
echoes the uid, or a 4xx with a JSON `Status`; never a 5xx or a hang, and the same workers are
alive afterwards. Each test prints a summary line with its counts. The examples are
derandomized so that CI runs the same bodies every time.
"""

from __future__ import annotations

import collections
import contextlib
import json
import string
import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.answers import checked_review
from tests.support.builders import admission_review, container, pod, workload
from tests.support.mutate import FUZZ, corrupted, mutated, nest, print_counts
from tests.support.policies import default_policies
from tools.loopback.https_client import Connection
from tools.reliability import procfs
from tools.reliability.load import connect
from tools.waiting import wait_for
from webhook.admission import parse_request, review

SELECTOR = {"aliyun.accelerator/nvidia_mem": "2048MiB"}


def _objects() -> list[dict]:
    """Valid objects that reach every branch: rewrite, pinned, annotation, sidecar, workloads."""
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
    return [
        *pods,
        workload("apps/v1", "Deployment", pods[0]),
        workload("batch/v1", "CronJob", pods[2]),
    ]


OBJECTS = _objects()
BASES = [admission_review(o, uid=f"fuzz-{i}") for i, o in enumerate(OBJECTS)] + [
    admission_review(OBJECTS[-2], operation="UPDATE", uid="fuzz-update")
]
# Half the bodies break anywhere (mostly the envelope: a 400); half break only the object
# inside an intact envelope, so that most of those reach the decision.
REVIEWS = st.one_of(
    mutated(BASES),
    mutated(OBJECTS).map(lambda obj: admission_review(obj, uid="fuzz-object")),
)


def test_mutated_reviews_in_process(capsys):
    counts: collections.Counter = collections.Counter()

    @settings(FUZZ, max_examples=2000)
    @given(body=REVIEWS, mutate=st.booleans())
    def check(body, mutate):
        result = checked_review(body, mutate)
        counts["400" if result is None else result.outcome] += 1

    check()
    print_counts(capsys, "in-process review fuzz", counts)
    # The generator must reach refusals of the envelope and every decision, or it tests little.
    assert (
        counts.keys() == {"400", "skipped", "allowed", "mutated", "denied"}
        and sum(counts.values()) >= 2000
    )


def _connect(server) -> Connection:
    return connect(server.port, server.ca)


def _wire(body: object, ascii_only: bool) -> bytes:
    # The stdlib encoder writes what orjson refuses (2**70, NaN, lone surrogates), so the
    # server's own parser meets them.
    return json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


# Drawn twice as often as a byte-level corruption (see the test): most corrupted bytes are
# refused by the JSON parser, structural mutations reach the decision.
WIRE_REVIEWS = st.builds(_wire, REVIEWS, st.booleans())


def check_over_https(conn, data: bytes) -> str:
    """POST `data` to /mutate; assert a 200 review or a 4xx Status. Returns the status code."""
    status, headers, answer = conn.call(
        "POST", "/mutate", data, {"Content-Type": "application/json"}
    )
    assert status < 500, answer[:2000]
    assert headers["Content-Type"] == "application/json"
    parsed = orjson.loads(answer)
    if status == 200:
        sent = orjson.loads(data)
        assert parsed["response"]["uid"] == sent["request"]["uid"]
        expected = review(parse_request(sent), default_policies(), "mutate")
        assert parsed == expected.response, "the server answers what admission.review builds"
    else:
        assert 400 <= status < 500 and parsed["kind"] == "Status" and parsed["code"] == status
    if headers.get("Connection", "").lower() == "close":
        conn.close()  # the next request opens a new connection
    return str(status)


def test_mutated_reviews_over_https(server, capsys):
    counts: collections.Counter = collections.Counter()

    # /readyz answered from the first worker up; gunicorn may still be forking the second.
    def both_workers() -> set[int] | None:
        found = procfs.children(server.process.pid)
        return found if len(found) == 2 else None

    workers = wait_for(both_workers, 30, what="both workers of the server")
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
    assert procfs.children(server.process.pid) == workers  # no worker died on the way


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


def test_no_object_contents_in_the_server_logs(server):
    """Secrets ride in env values and annotations: only the review's identity is logged."""
    marker = f"lwgpu-marker-{uuid.uuid4().hex}"
    secret = {"name": "DB_PASSWORD", "value": f"hunter2-{marker}"}
    gpu = container(limits={"aliyun.com/gpu-mem": 2}, env=[secret], image=f"example/{marker}")
    reviews = [
        pod(gpu, annotations={"note": marker}),  # mutated
        pod(container(limits={"aliyun.com/gpu-mem": marker}, env=[secret])),  # denied
        pod(container(env=[secret])),  # skipped
    ]
    requests = [
        *((_wire(admission_review(p), True), "application/json", 200) for p in reviews),
        (
            _wire({"kind": marker, "request": {"uid": "x", "object": secret}}, True),
            "application/json",
            400,
        ),
        (b'{"request": {"uid": "' + marker.encode() + b'", "object": {', "application/json", 400),
        (_wire(admission_review(reviews[0]), True), "text/plain", 415),
    ]
    logged = len(server.log_lines())
    with contextlib.closing(_connect(server)) as conn:
        for data, content_type, code in requests:
            assert conn.call("POST", "/mutate", data, {"Content-Type": content_type})[0] == code
    # One line per request, written before the answer was sent.
    assert len(server.log_lines()) == logged + len(requests)
    for log in (server.stdout, server.stderr):
        assert marker.encode() not in log.read_bytes(), log.name
