"""Every patch the decision makes applies with Kubernetes' own JSON Patch engine.

`kubectl patch --local --type json -f FILE -p OPS -o json` applies the ops with the
same code the apiserver uses for a webhook's JSONPatch, without a cluster. Its
result must equal both the decision's rewritten object and `jsonpatch`'s result;
label and annotation keys containing `/` and `~` must survive the escaping.
"""

from __future__ import annotations

import jsonpatch
import pytest
import yaml

from tests.support.builders import WORKLOAD_KINDS, container, pod, workload
from tests.support.kubectl import kubectl_patch, requires_kubectl
from tests.support.manifests import corpus_files, named_documents
from tests.support.paths import EXAMPLES
from tests.support.policies import default_policy, tainted_policy
from webhook.core.decision import decide

ODD_KEYS = {"example.com/zone~a": "x", "a~1b/c~0d": "y", "team": "ml"}

CASES = [
    (
        "seed-deployment-gpu-mem",
        yaml.safe_load((EXAMPLES / "cuda-sample-gpu-mem.yaml").read_text(encoding="utf-8")),
        None,
    ),
    ("pod-hami-gpumem", pod(container(limits={"nvidia.com/gpumem": 3000, "cpu": "1"})), None),
    (
        "pod-requests-and-limits",
        pod(
            container(
                limits={"aliyun.com/gpu-mem": "1"}, requests={"aliyun.com/gpu-mem": 1, "cpu": "1"}
            )
        ),
        None,
    ),
    (
        "pod-annotation",
        pod(container(limits={"cpu": "1"}), annotations={"lwgpu.io/gpu-memory": "1536Mi"}),
        None,
    ),
    (
        "pod-annotation-named-container",
        pod(
            container("app"),
            container("infer", resources=None),
            annotations={"lwgpu.io/gpu-memory": "3Gi", "lwgpu.io/container": "infer"},
        ),
        None,
    ),
    (
        "pod-sidecar",
        pod(
            container("app"),
            init=(
                container("gpu-proxy", limits={"nvidia.com/gpumem": 1024}, restartPolicy="Always"),
            ),
        ),
        None,
    ),
    (
        "pod-odd-selector-and-annotation-keys",
        pod(
            container(limits={"aliyun.com/gpu-mem": 4}),
            node_selector=dict(ODD_KEYS),
            annotations={"a/b~c": "kept", "~": "tilde"},
        ),
        None,
    ),
    (
        "pod-tolerations-profile",
        pod(
            container(limits={"nvidia.com/gpumem": 4096}),
            tolerations=[
                {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
            ],
        ),
        tainted_policy(),
    ),
    (
        "deployment-tolerations-profile",
        workload(
            "apps/v1",
            "Deployment",
            pod(container(limits={"aliyun.com/gpu-mem": 2}), node_selector={"a/b": "c"}),
        ),
        tainted_policy(),
    ),
    *[
        (f"{kind.lower()}-gpu-mem", workload(api, kind, pod(node_selector=dict(ODD_KEYS))), None)
        for api, kind in WORKLOAD_KINDS
    ],
]
# Real manifests that the shipped policy rewrites.
CORPUS_CASES = [
    (name, body, None)
    for name, body in named_documents(corpus_files())
    if decide(body, default_policy()).outcome == "mutated"
]


def test_the_corpus_gives_real_rewrites():
    """The corpus holds gpushare and HAMi manifests that the shipped policy rewrites."""
    assert {obj["kind"] for _, obj, _ in CORPUS_CASES} >= {
        "Pod",
        "Deployment",
        "StatefulSet",
        "Job",
    }


@requires_kubectl
@pytest.mark.parametrize(
    ("obj", "policy"), [pytest.param(o, p, id=i) for i, o, p in CASES + CORPUS_CASES]
)
def test_kubectl_applies_the_patch(tmp_path, obj, policy):
    """kubectl's JSON Patch engine, jsonpatch and the decision agree on the rewritten object."""
    decision = decide(obj, policy or default_policy())
    assert decision.outcome == "mutated", decision.reason
    ops = list(decision.patch)
    assert ops
    by_kubectl = kubectl_patch(tmp_path, obj, ops)
    assert by_kubectl == decision.obj
    assert jsonpatch.apply_patch(obj, ops) == decision.obj


@requires_kubectl
@pytest.mark.parametrize("policy", [None, tainted_policy()], ids=["default", "tainted"])
def test_odd_keys_survive_the_patch(tmp_path, policy):
    """User nodeSelector and annotation keys with `/` and `~` are kept, with their values."""
    obj = pod(
        container(limits={"nvidia.com/gpumem": 2000}),
        node_selector=dict(ODD_KEYS),
        annotations={"a/b~c": "kept"},
    )
    chosen = policy or default_policy()
    decision = decide(obj, chosen)
    patched = kubectl_patch(tmp_path, obj, list(decision.patch))
    selector = patched["spec"]["nodeSelector"]
    assert {k: selector[k] for k in ODD_KEYS} == ODD_KEYS
    profile = next(p for p in chosen.profiles if p.name == decision.profile)
    assert {k: selector[k] for k in profile.node_selector} == dict(profile.node_selector)
    assert patched["metadata"]["annotations"]["a/b~c"] == "kept"
    assert patched["metadata"]["annotations"]["lwgpu.io/profile"] == decision.profile
    assert patched["spec"].get("tolerations", []) == [dict(t) for t in profile.tolerations]
