"""`review` of a manifest predicts what the cluster does with it.

A kube-apiserver hands the webhook a manifest decoded and defaulted (`webhook.api.decoding`:
`nvidia.com/gpumem: 3000` arrives as `3k`, a Pod's limits are copied to its requests; seen on
v1.37.2), and after the webhook's patch decodes and defaults the object again before storing
it. So for each way of writing the same ask, offline `review` must give the answer the server
gives for the AdmissionReview the apiserver sends, word the amount in the resource's unit
(`nvidia.com/gpumem=3000`, never `3k`) and print as stored the object the apiserver stores.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.support.builders import admission_review, container, pod, workload
from tests.support.cli import run_cli
from tests.support.policies import default_policies
from webhook.admission import parse_request, review
from webhook.api.decoding import as_decoded

GPUMEM, GPU, MEMORY = "nvidia.com/gpumem", "nvidia.com/gpu", "lwgpu.io/gpu-memory"
C0 = "/spec/containers/0/resources"
T0 = "/spec/template/spec/containers/0/resources"


def deployment(limits: dict[str, Any]) -> dict[str, Any]:
    return workload("apps/v1", "Deployment", pod(container(limits=limits)), name="hami")


# (id, manifest, the webhook's resource operations, rewritten-from, the stored resources)
CASES = [
    (
        "pod-limits-only",
        pod(container(limits={GPUMEM: 3000}), name="hami"),
        [
            ("remove", f"{C0}/limits/nvidia.com~1gpumem"),
            ("remove", f"{C0}/requests/nvidia.com~1gpumem"),
            ("add", f"{C0}/limits/nvidia.com~1gpu"),
            ("add", f"{C0}/requests/nvidia.com~1gpu"),
        ],
        "nvidia.com/gpumem=3000",
        {"limits": {GPU: "1"}, "requests": {GPU: "1"}},
    ),
    (
        "pod-limits-and-requests",
        pod(container(limits={GPUMEM: "3k"}, requests={GPUMEM: 3000}), name="hami"),
        [
            ("remove", f"{C0}/limits/nvidia.com~1gpumem"),
            ("remove", f"{C0}/requests/nvidia.com~1gpumem"),
            ("add", f"{C0}/limits/nvidia.com~1gpu"),
            ("add", f"{C0}/requests/nvidia.com~1gpu"),
        ],
        "nvidia.com/gpumem=3000",
        {"limits": {GPU: "1"}, "requests": {GPU: "1"}},
    ),
    (
        "pod-memory-2048Mi",
        pod(container(limits={"aliyun.com/gpu-mem": 2, "memory": "2048Mi"}), name="hami"),
        [
            ("remove", f"{C0}/limits/aliyun.com~1gpu-mem"),
            ("remove", f"{C0}/requests/aliyun.com~1gpu-mem"),
            ("add", f"{C0}/limits/nvidia.com~1gpu"),
            ("add", f"{C0}/requests/nvidia.com~1gpu"),
        ],
        "aliyun.com/gpu-mem=2",
        {"limits": {"memory": "2Gi", GPU: "1"}, "requests": {"memory": "2Gi", GPU: "1"}},
    ),
    (
        "pod-annotation-2048Mi",
        pod(container(), annotations={MEMORY: "2048Mi"}, name="hami"),
        [("add", f"{C0}")],
        "lwgpu.io/gpu-memory=2048Mi",
        # The patch sets limits; the apiserver defaults the requests after it.
        {"limits": {GPU: "1"}, "requests": {GPU: "1"}},
    ),
    (
        "deployment-limits-only",
        deployment({GPUMEM: 3000}),
        [
            ("remove", f"{T0}/limits/nvidia.com~1gpumem"),
            ("add", f"{T0}/limits/nvidia.com~1gpu"),
        ],
        "nvidia.com/gpumem=3000",
        {"limits": {GPU: "1"}},
    ),
]


def _review(manifest: dict[str, Any], fmt: str) -> tuple[int, str, str]:
    return run_cli("review", "-", "-o", fmt, stdin=yaml.safe_dump(manifest))


def _template(obj: dict[str, Any]) -> dict[str, Any]:
    return obj if obj["kind"] == "Pod" else obj["spec"]["template"]


@pytest.mark.parametrize(
    ("manifest", "operations", "source", "stored"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_review_predicts_the_cluster(manifest, operations, source, stored):
    """Offline review answers as the server answers the AdmissionReview the apiserver sends
    (the decoded manifest): same verdict, same patch, same warnings; and the patch touches the
    forms the apiserver handed over (a Pod's defaulted requests, a template's limits only)."""
    code, out, err = _review(manifest, "json")
    assert code == 0, err
    [verdict] = json.loads(out)
    server = review(
        parse_request(admission_review(as_decoded(manifest))), default_policies(), "mutate"
    )
    answer = server.response["response"]
    assert verdict["outcome"] == server.outcome == "mutated"
    assert verdict["patch"] == list(server.decision.patch)
    assert verdict["warnings"] == answer["warnings"]
    assert [(op["op"], op["path"]) for op in verdict["patch"][: len(operations)]] == operations
    assert verdict["warnings"][0].startswith(f"lwgpu: {source} (")


@pytest.mark.parametrize(
    ("manifest", "operations", "source", "stored"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_yaml_is_the_stored_object(manifest, operations, source, stored):
    """`-o yaml` prints the object as stored: resources rewritten, respelled and, in a Pod,
    requests defaulted again after the patch; the audit annotation in the resource's unit."""
    code, out, err = _review(manifest, "yaml")
    assert code == 0, err
    template = _template(yaml.safe_load(out))
    assert template["spec"]["containers"][0]["resources"] == stored
    assert template["metadata"]["annotations"]["lwgpu.io/rewritten-from"] == source


@pytest.mark.parametrize("written", [2048, 2048.0, "2048", "2.048k", "2048000m", "2.048e3"])
def test_spellings_of_one_ask_get_one_answer(written):
    """Every spelling of 2048 MiB is reviewed alike and worded `2048`, never as spelled."""
    code, out, err = _review(pod(container(limits={GPUMEM: written}), name="hami"), "json")
    assert code == 0, err
    [verdict] = json.loads(out)
    assert verdict["profile"] == "GRID-P4-2Q"
    assert verdict["warnings"][0].startswith("lwgpu: nvidia.com/gpumem=2048 (2048Mi) -> ")


@pytest.mark.parametrize("written", ["2048Mi", "2Gi"])
def test_binary_sizes_are_one_size(written):
    """`2048Mi` and `2Gi` of a MiB-counted resource both arrive as `2Gi`: the same denial, which
    says how a size was read and what to write instead."""
    code, _, err = _review(pod(container(limits={GPUMEM: written}), name="hami"), "yaml")
    assert code == 1
    assert "nvidia.com/gpumem counts MiB, so for 2Gi write nvidia.com/gpumem: 2048" in err
    assert "asks nvidia.com/gpumem=2Gi, read as 2147483648Mi" in err
