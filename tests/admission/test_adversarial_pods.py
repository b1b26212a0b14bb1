"""Pods built to hurt: near the apiserver's 3 MiB cap, 500 containers, keys with `~1` and `/`,
duplicate container names, `resources` as `{}`, null or a list, 100 KB values.

The review completes (the test asserts that it returns, never how fast), the answer is
well-formed (`tests/support/answers.py`: the patch applies with `jsonpatch`, yields the
decision's object and is stable under a second review), the patch also applies with
Kubernetes' own engine (`kubectl patch --local --type json`, skipped without kubectl), and a
denial stays short whatever the pod carries.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support.answers import MESSAGE_LIMIT, checked_review, patch_of
from tests.support.builders import admission_review, container, pod, workload
from tests.support.kubectl import kubectl_patch, requires_kubectl

# The apiserver refuses request bodies over 3 MiB, so no stored object is larger.
APISERVER_LIMIT = 3 * 1024 * 1024
BIG = 100 * 1024
GPU_MEM = {"aliyun.com/gpu-mem": 2}


def near_limit(*containers: dict) -> dict:
    """A pod of `containers` whose JSON is just under 3 MiB (padding in env values)."""
    body = pod(*containers)
    room = APISERVER_LIMIT - 4096 - len(json.dumps(body))
    body["spec"]["containers"][0]["env"] = [
        {"name": f"CONFIG_{i}", "value": "v" * 1000} for i in range(room // 1030)
    ]
    return body


def many(count: int, gpu_every: int, section: str = "containers") -> dict:
    """A pod with `count` containers in `section`; every `gpu_every`-th asks for GPU memory."""
    items = [
        container(f"c{i}", limits=GPU_MEM if i % gpu_every == 0 else {"cpu": "10m"})
        for i in range(count)
    ]
    if section == "containers":
        return pod(*items)
    return pod(container("main"), init=tuple(items))


ODD_KEYS = {"example.com/a~1b": "x", "~0": "tilde", "/": "slash", "a/b/c~": "y"}
ANNOTATION_TARGET = {"lwgpu.io/gpu-memory": "2Gi", "lwgpu.io/container": "cuda"}

# name, object, the decision. Objects go through JSON first: the builders share dicts such
# as GPU_MEM between containers, which JSON never does (and jsonpatch's deepcopy keeps).
CASES = [
    ("near-3mib", near_limit(container(limits=GPU_MEM)), "mutated"),
    ("near-3mib-denied", near_limit(container(limits={"aliyun.com/gpu-mem": 64})), "denied"),
    ("500-containers-one-gpu", many(500, 500), "mutated"),
    ("500-containers-all-gpu", many(500, 1), "denied"),
    ("500-init-containers-gpu", many(500, 1, "initContainers"), "mutated"),
    (
        "keys-with-tilde-and-slash",
        pod(container(limits=GPU_MEM), node_selector=dict(ODD_KEYS), annotations=dict(ODD_KEYS)),
        "mutated",
    ),
    (
        "deployment-keys-with-tilde-and-slash",
        workload("apps/v1", "Deployment", pod(node_selector=dict(ODD_KEYS))),
        "mutated",
    ),
    (
        "duplicate-names-both-gpu",
        pod(container(limits=GPU_MEM), container(limits=GPU_MEM)),
        "denied",
    ),
    (
        "duplicate-names-annotation",
        pod(container(), container(), annotations=dict(ANNOTATION_TARGET)),
        "mutated",
    ),
    (
        "resources-empty",
        pod(container(resources={}), annotations=dict(ANNOTATION_TARGET)),
        "mutated",
    ),
    (
        "resources-null",
        pod(container(resources=None), annotations=dict(ANNOTATION_TARGET)),
        "mutated",
    ),
    (
        "resources-list",
        pod(container(resources=[]), annotations=dict(ANNOTATION_TARGET)),
        "mutated",
    ),
    ("resources-list-gpu", pod(container(resources=[GPU_MEM])), "skipped"),
    ("limits-null-requests-gpu", pod(container(limits=None, requests=GPU_MEM)), "mutated"),
    (
        "limits-list",
        pod(container(resources={"limits": [GPU_MEM], "requests": GPU_MEM})),
        "mutated",
    ),
]
CASES = [(name, json.loads(json.dumps(obj)), decision) for name, obj, decision in CASES]


@pytest.mark.parametrize("name,obj,decision", CASES, ids=[c[0] for c in CASES])
def test_adversarial_pod_is_decided(name, obj, decision):
    result = checked_review(admission_review(obj, uid=name))
    assert result is not None and result.outcome == decision


@requires_kubectl
@pytest.mark.parametrize(
    "name,obj",
    [(n, o) for n, o, d in CASES if d == "mutated"],
    ids=[c[0] for c in CASES if c[2] == "mutated"],
)
def test_adversarial_patch_applies_with_kubectl(tmp_path, name, obj):
    result = checked_review(admission_review(obj, uid=name))
    assert kubectl_patch(tmp_path, obj, patch_of(result)) == result.decision.obj


def long_run(message: str) -> int:
    """The longest run of one repeated character in `message`."""
    return max((len(m.group()) for m in re.finditer(r"(.)\1*", message, re.DOTALL)), default=0)


# name, a pod whose denial could echo a 100 KB value: the field the message must name.
ECHOES = [
    (
        "container-name",
        pod(container("n" * BIG, limits=GPU_MEM), container("m" * BIG, limits=GPU_MEM)),
        "spec: the pod needs 2 GPUs",
    ),
    (
        "memory-annotation",
        pod(annotations={"lwgpu.io/gpu-memory": "9" * BIG}),
        "metadata.annotations[lwgpu.io/gpu-memory]",
    ),
    (
        "container-annotation",
        pod(
            container(), annotations={"lwgpu.io/gpu-memory": "2Gi", "lwgpu.io/container": "c" * BIG}
        ),
        "metadata.annotations[lwgpu.io/container]",
    ),
    (
        "quantity",
        pod(container(limits={"aliyun.com/gpu-mem": "7" * BIG})),
        "spec.containers[0].resources.limits[aliyun.com/gpu-mem]",
    ),
    (
        "gpu-count",
        pod(container(limits={"nvidia.com/gpu": "g" * BIG})),
        "spec.containers[0].resources.limits[nvidia.com/gpu]",
    ),
    (
        "limits-differ",
        pod(
            container(
                limits={"aliyun.com/gpu-mem": "1" * BIG}, requests={"aliyun.com/gpu-mem": "2" * BIG}
            )
        ),
        "spec.containers[0].resources: limits[aliyun.com/gpu-mem]=",
    ),
    ("node-name", pod(nodeName="x" * BIG), "spec.nodeName"),
    (
        "pinned-selector",
        pod(node_selector={"aliyun.accelerator/nvidia_mem": "s" * BIG}),
        "spec.nodeSelector: nodeSelector aliyun.accelerator/nvidia_mem=",
    ),
]


@pytest.mark.parametrize("name,obj,field", ECHOES, ids=[e[0] for e in ECHOES])
def test_denial_never_echoes_unbounded_input(name, obj, field):
    result = checked_review(admission_review(obj, uid=name))
    assert result is not None and result.outcome == "denied"
    message = result.response["response"]["status"]["message"]
    assert message.startswith(field), message[:300]
    assert len(message) <= MESSAGE_LIMIT and long_run(message) <= 64, message[:300]
