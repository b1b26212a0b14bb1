"""The `auditAnnotations` of every answer (webhook/admission/audit.py): what they say for a
rewritten, a refused and a skipped pod on both endpoints (goldens in tests/golden/admission/),
that the apiserver accepts each key, that every value is bounded and names no object content.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from tests.support.builders import IMAGE, SECRET_ENV, container, gpu_mem, pod
from tests.support.golden import check_golden_json
from tests.support.paths import GOLDEN
from tests.support.policies import default_policies
from webhook.admission import API_VERSION, KIND, Endpoint, parse_request, review
from webhook.admission.audit import VALUE_LIMIT

# staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go, `IsLabelKey` (what
# admission/attributes.go `checkKeyFormat` calls as `validation.IsQualifiedName`): the name
# part after the webhook's name and '/'.
NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
WEBHOOKS = ("mutate.lwgpu.io", "validate.lwgpu.io")

PODS: dict[str, tuple[str, Any]] = {
    "rewritten": ("default", pod(gpu_mem(2))),
    "refused": ("default", pod(gpu_mem(64))),
    "skipped": ("kube-system", pod(gpu_mem(2))),
}


def annotations(obj: Any, namespace: str = "default", endpoint: Endpoint = "mutate") -> Any:
    """The auditAnnotations of the answer to a CREATE of `obj` in `namespace`."""
    body = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "request": {
            "uid": "b9a1c0de-0000-4000-8000-0000000000a1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": namespace,
            "object": obj,
        },
    }
    result = review(parse_request(body), default_policies(), endpoint)
    return result.response["response"]["auditAnnotations"]


@pytest.mark.parametrize("case", sorted(PODS))
def test_golden_annotations_of_both_endpoints(case: str) -> None:
    namespace, obj = PODS[case]
    answers = {e: annotations(obj, namespace, e) for e in ("mutate", "validate")}
    check_golden_json(GOLDEN / "admission" / f"audit-{case}.json", orjson.dumps(answers))


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # Two containers asking: both asks, in the pod's order.
        (
            pod(gpu_mem(1, "a"), container("b", limits={"nvidia.com/gpu": 1})),
            "aliyun.com/gpu-mem=1, nvidia.com/gpu=1",
        ),
        # The annotation way of asking: the annotation as written.
        (
            pod(container(), annotations={"lwgpu.io/gpu-memory": "3Gi"}),
            "lwgpu.io/gpu-memory=3Gi",
        ),
        # HAMi's MiB resource, in its own unit.
        (pod(container(limits={"nvidia.com/gpumem": 3000})), "nvidia.com/gpumem=3000"),
    ],
)
def test_asked_is_each_gpu_ask_as_written(obj: Any, expected: str) -> None:
    assert annotations(obj)["asked"] == expected


def test_asks_that_cannot_be_read_leave_asked_out() -> None:
    """The refusal says what is wrong with the ask; the annotation does not repeat it."""
    found = annotations(pod(gpu_mem("two")))
    assert found == {"decision": "denied", "policy": "default"}


def test_a_whole_gpu_pod_has_no_class() -> None:
    found = annotations(pod(container(limits={"nvidia.com/gpu": 1})))
    assert found == {"decision": "allowed", "policy": "default", "asked": "nvidia.com/gpu=1"}


def test_every_key_is_a_qualified_name_under_each_webhook_name() -> None:
    for namespace, obj in PODS.values():
        for endpoint, webhook in zip(("mutate", "validate"), WEBHOOKS, strict=True):
            for key in annotations(obj, namespace, endpoint):
                assert NAME_PART.match(key) and len(key) <= 63, key
                assert len(f"{webhook}/{key}") <= 253


def test_values_are_bounded_and_name_no_object_content() -> None:
    """A pod of 200 GPU containers, each with a long name, an image and a secret variable."""
    many = [gpu_mem(1, f"container-{i:03d}-" + "x" * 40, env=[SECRET_ENV]) for i in range(200)]
    found = annotations(pod(*many, name="p" * 253))
    assert len(found["asked"]) == VALUE_LIMIT and found["asked"].endswith("…")
    text = " ".join(found.values())
    for content in ("container-", IMAGE, SECRET_ENV["name"], SECRET_ENV["value"], "ppp"):
        assert content not in text
