"""The admission server over real HTTPS: reviews, keep-alive, the review CLI's twin answers, logs.

One gunicorn (2 gthread workers, real certificates) serves the whole module; tests that
stop or reconfigure a server start their own.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import sys
import uuid

import jsonpatch
import orjson
import pytest

from tests.support.builders import admission_review, gpu_pod
from tests.support.paths import REPO
from tools.waiting import wait_for

DEFAULT_POLICY = REPO / "policies" / "default.yaml"
SEED_SELECTOR = {"aliyun.accelerator/nvidia_mem": "2048MiB"}
LOG_FIELDS = {
    "uid",
    "namespace",
    "name",
    "kind",
    "operation",
    "endpoint",
    "status",
    "decision",
    "profile",
    "dry_run",
    "duration_ms",
}


# endpoint, limits, nodeSelector, allowed, decision, limits after the patch (None: no patch)
REVIEWS = [
    ("mutate", {"aliyun.com/gpu-mem": 2}, None, True, "mutated", {"nvidia.com/gpu": "1"}),
    ("mutate", {"nvidia.com/gpumem": 3000}, None, True, "mutated", {"nvidia.com/gpu": "1"}),
    ("validate", {"aliyun.com/gpu-mem": 2}, None, False, "denied", None),
    ("mutate", {"nvidia.com/gpu": "1"}, SEED_SELECTOR, True, "allowed", None),
    ("validate", {"nvidia.com/gpu": "1"}, SEED_SELECTOR, True, "allowed", None),
    ("mutate", {"nvidia.com/gpu": "2"}, SEED_SELECTOR, False, "denied", None),
    ("mutate", {"cpu": "1"}, None, True, "skipped", None),
]


@pytest.mark.parametrize("endpoint,limits,selector,allowed,decision,patched", REVIEWS)
def test_review_endpoints(server, endpoint, limits, selector, allowed, decision, patched):
    pod = gpu_pod(limits, node_selector=selector)
    uid = str(uuid.uuid4())
    status, body = server.review(endpoint, admission_review(pod, uid=uid))
    assert status == 200
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    answer = body["response"]
    assert answer["uid"] == uid and answer["allowed"] is allowed
    assert ("patch" in answer) is (patched is not None)
    if patched is not None:
        assert answer["patchType"] == "JSONPatch"
        ops = orjson.loads(base64.b64decode(answer["patch"]))
        mutated = jsonpatch.apply_patch(pod, ops)
        assert mutated["spec"]["containers"][0]["resources"]["limits"] == patched
        assert all(len(w) <= 120 for w in answer["warnings"])
    if not allowed:
        assert answer["status"]["code"] == 403 and answer["status"]["message"]
    line = wait_for(lambda: [x for x in server.log_lines() if x["uid"] == uid], what="log line")
    assert [(x["decision"], x["endpoint"], x["status"]) for x in line] == [
        (decision, endpoint, 200)
    ]


def test_three_reviews_on_one_kept_alive_connection(server):
    conn = server.connect()
    sockets = []
    with contextlib.closing(conn):
        for n in range(3):
            review = admission_review(gpu_pod({"aliyun.com/gpu-mem": 1}), uid=f"keepalive-{n}")
            status, body = conn.review("mutate", review)
            assert status == 200 and body["response"]["uid"] == f"keepalive-{n}"
            # http.client drops its socket when the server says "Connection: close".
            sockets.append(conn.sock)
    assert sockets[0] is not None and all(sock is sockets[0] for sock in sockets)


@pytest.mark.parametrize(
    "limits,selector,dry_run",
    [
        ({"aliyun.com/gpu-mem": 2}, None, False),
        ({"aliyun.com/gpu-mem": 2}, None, True),
        ({"nvidia.com/gpu": "2"}, SEED_SELECTOR, False),
        ({"nvidia.com/gpu": "1"}, SEED_SELECTOR, False),
    ],
)
def test_answer_equals_review_cli(server, tmp_path, limits, selector, dry_run):
    review = admission_review(
        gpu_pod(limits, node_selector=selector), uid="cli-twin", dry_run=dry_run
    )
    path = tmp_path / "review.json"
    path.write_bytes(orjson.dumps(review))
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            str(path),
            "--output",
            "json",
            "--policies",
            str(DEFAULT_POLICY),
        ],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    assert cli.returncode in (0, 1), cli.stderr
    status, answer = server.review("mutate", review)
    assert status == 200
    assert answer == orjson.loads(cli.stdout)


def test_log_lines_name_the_review_and_nothing_of_the_object(server):
    pod = gpu_pod({"aliyun.com/gpu-mem": 2}, generate_name="trainer-7d9f8-")
    server.review("mutate", admission_review(pod, uid="log-check", namespace="ml", dry_run=True))
    [line] = wait_for(
        lambda: [x for x in server.log_lines() if x["uid"] == "log-check"], what="log line"
    )
    assert set(line) == LOG_FIELDS
    assert {k: line[k] for k in LOG_FIELDS - {"duration_ms"}} == {
        "uid": "log-check",
        "namespace": "ml",
        "name": "trainer-7d9f8-",
        "kind": "Pod",
        "operation": "CREATE",
        "endpoint": "mutate",
        "status": 200,
        "decision": "mutated",
        "profile": "GRID-P4-2Q",
        "dry_run": True,
    }
    assert 0 < line["duration_ms"] < 10_000
    assert (
        b"s3cr3t" not in server.stdout.read_bytes()
        and b"nvidia/cuda" not in server.stdout.read_bytes()
    )


@pytest.mark.parametrize("path,code", [("/healthz", 200), ("/readyz", 200)])
def test_probes(server, path, code):
    status, body = server.get(path)
    assert status == code
    assert orjson.loads(body)["status"] in ("ok", "ready")
