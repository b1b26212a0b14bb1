"""The decision, rule by rule (SPEC §3), over pods: one table of cases, each with its outcome,
class and the words its reason or warning must hold (workload kinds and scope: test_rewrite.py).
"""

import copy

import jsonpatch
import pytest

from tests.support.builders import MEM, container, gpu_mem, pod
from tests.support.policies import default_policy
from webhook.core.decision import decide

DEFAULT = default_policy()


def affinity(*terms):
    """A required node affinity with one nodeSelectorTerm per group of match expressions."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
            }
        }
    }


SIDE = {"restartPolicy": "Always"}
ANN = "lwgpu.io/gpu-memory"

# (id, object, expected outcome, expected profile or None, substrings of reason/warning)
CASES = [
    (
        "seed-form",
        pod(container(limits={"nvidia.com/gpu": "1"}), node_selector={MEM: "2048MiB"}),
        "allowed",
        "GRID-P4-2Q",
        [],
    ),
    (
        "gpu-mem-2",
        pod(gpu_mem(2)),
        "mutated",
        "GRID-P4-2Q",
        ["aliyun.com/gpu-mem=2 (2048Mi) -> nvidia.com/gpu=1 on GRID-P4-2Q"],
    ),
    ("gpu-mem-string", pod(gpu_mem("1")), "mutated", "GRID-P4-1Q", []),
    ("gpu-mem-fraction", pod(gpu_mem("1.5")), "mutated", "GRID-P4-2Q", []),
    (
        "hami-gpumem",
        pod(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})),
        "mutated",
        "GRID-P4-4Q",
        ["nvidia.com/gpumem=3000 (3000Mi)"],
    ),
    (
        "init-plus-app",
        pod(gpu_mem(2), init=[container("warm", limits={"nvidia.com/gpu": 1})]),
        "mutated",
        "GRID-P4-2Q",
        [],
    ),
    (
        "init-and-app-memory",
        pod(gpu_mem(2), init=[gpu_mem(4, name="prep")]),
        "mutated",
        "GRID-P4-4Q",
        ["(4096Mi)"],
    ),
    (
        "sidecar-adds-up",
        pod(gpu_mem(2), init=[gpu_mem(1, name="side", **SIDE)]),
        "denied",
        None,
        ["needs 2 GPUs", "initContainers[0] (side): 1", "exactly one GPU"],
    ),
    (
        "two-app-containers",
        pod(gpu_mem(2), gpu_mem(1, name="worker")),
        "denied",
        None,
        ["spec: the pod needs 2 GPUs", "containers[1] (worker): 1", "split the pod"],
    ),
    ("pinned-larger", pod(gpu_mem(2), node_selector={MEM: "4096MiB"}), "mutated", "GRID-P4-4Q", []),
    (
        "pinned-smaller",
        pod(gpu_mem(2), node_selector={MEM: "1024MiB"}),
        "denied",
        None,
        [
            "pins GRID-P4-1Q",
            "aliyun.com/gpu-mem=2 (2048Mi)",
            "remove the selector or pin GRID-P4-2Q",
        ],
    ),
    (
        "pinned-unknown",
        pod(gpu_mem(2), node_selector={MEM: "16384MiB"}),
        "denied",
        None,
        [
            "spec.nodeSelector: nodeSelector aliyun.accelerator/nvidia_mem=16384MiB matches no",
            "lightweight GPU class",
            "remove it",
        ],
    ),
    (
        "affinity-in",
        pod(
            gpu_mem(2),
            affinity=affinity([{"key": MEM, "operator": "In", "values": ["1024MiB", "4096MiB"]}]),
        ),
        "mutated",
        "GRID-P4-4Q",
        [],
    ),
    (
        "affinity-notin",
        pod(
            gpu_mem(1),
            affinity=affinity(
                [{"key": MEM, "operator": "NotIn", "values": ["1024MiB", "2048MiB"]}]
            ),
        ),
        "mutated",
        "GRID-P4-4Q",
        [],
    ),
    (
        "affinity-one-term-free",
        pod(
            gpu_mem(1),
            affinity=affinity(
                [{"key": MEM, "operator": "In", "values": ["8192MiB"]}],
                [{"key": "zone", "operator": "In", "values": ["a"]}],
            ),
        ),
        "mutated",
        "GRID-P4-1Q",
        [],
    ),
    (
        "node-name-preset",
        pod(gpu_mem(2), nodeName="node-7"),
        "denied",
        None,
        ["spec.nodeName", "'node-7'", "remove spec.nodeName"],
    ),
    (
        "limits-neq-requests",
        pod(container(limits={"aliyun.com/gpu-mem": 2}, requests={"aliyun.com/gpu-mem": 1})),
        "denied",
        None,
        ["limits[aliyun.com/gpu-mem]=2 and requests[aliyun.com/gpu-mem]=1 differ"],
    ),
    (
        "limits-eq-requests",
        pod(container(limits={"aliyun.com/gpu-mem": 2}, requests={"aliyun.com/gpu-mem": "2"})),
        "mutated",
        "GRID-P4-2Q",
        [],
    ),
    (
        "requests-only",
        pod(container(requests={"aliyun.com/gpu-mem": 4, "cpu": "1"})),
        "mutated",
        "GRID-P4-4Q",
        [],
    ),
    (
        "annotation",
        pod(container(), annotations={ANN: "1536Mi"}),
        "mutated",
        "GRID-P4-2Q",
        ["lwgpu.io/gpu-memory=1536Mi (1536Mi)"],
    ),
    (
        "annotation-decimal",
        pod(container(), annotations={ANN: "500M"}),
        "mutated",
        "GRID-P4-1Q",
        [],
    ),
    (
        "annotation-two-containers",
        pod(container("app"), container("b"), annotations={ANN: "1Gi"}),
        "denied",
        None,
        ["has 2 (app, b)", "lwgpu.io/container"],
    ),
    (
        "annotation-named-container",
        pod(container("app"), container("b"), annotations={ANN: "3Gi", "lwgpu.io/container": "b"}),
        "mutated",
        "GRID-P4-4Q",
        [],
    ),
    (
        "annotation-unknown-container",
        pod(container(), annotations={ANN: "1Gi", "lwgpu.io/container": "nope"}),
        "denied",
        None,
        ["no container is named"],
    ),
    (
        "annotation-no-unit",
        pod(container(), annotations={ANN: "2"}),
        "denied",
        None,
        ["metadata.annotations[lwgpu.io/gpu-memory]", "less than 1Mi", "2Gi"],
    ),
    (
        "annotation-garbage",
        pod(container(), annotations={ANN: "lots"}),
        "denied",
        None,
        ["'lots' is not a Kubernetes quantity"],
    ),
    (
        "gpu-2-lightweight",
        pod(container(limits={"nvidia.com/gpu": 2}), node_selector={MEM: "2048MiB"}),
        "denied",
        None,
        ["needs 2 GPUs"],
    ),
    (
        "gpu-2-whole-node",
        pod(container(limits={"nvidia.com/gpu": 2})),
        "allowed",
        None,
        ["whole GPUs"],
    ),
    (
        "gpu-fractional",
        pod(container(limits={"nvidia.com/gpu": "0.5"})),
        "denied",
        None,
        ["not a whole number of devices"],
    ),
    (
        "too-big",
        pod(gpu_mem(16)),
        "denied",
        None,
        [
            "containers[0].resources",
            "(16384Mi), more than the largest",
            "GRID-P4-8Q (8192Mi)",
            "ask for at most aliyun.com/gpu-mem: 8 (units of 1Gi)",
        ],
    ),
    (
        "too-big-hami",
        pod(container(limits={"nvidia.com/gpumem": 16000})),
        "denied",
        None,
        ["ask for at most nvidia.com/gpumem: 8192 (units of 1Mi)"],
    ),
    (
        "too-big-annotation",
        pod(container(), annotations={ANN: "9Gi"}),
        "denied",
        None,
        ["ask for at most 8192Mi"],
    ),
    (
        "two-memory-resources",
        pod(container(limits={"aliyun.com/gpu-mem": 2, "nvidia.com/gpumem": 2048})),
        "denied",
        None,
        ["asks GPU memory twice"],
    ),
    (
        "bad-memory-value",
        pod(gpu_mem("two")),
        "denied",
        None,
        ["'two' is not a Kubernetes quantity"],
    ),
    ("zero-memory", pod(gpu_mem(0)), "denied", None, ["must be greater than zero"]),
    ("cpu-only", pod(container(limits={"cpu": "1", "memory": "1Gi"})), "skipped", None, []),
    (
        "skip-annotation",
        pod(gpu_mem(2), annotations={"lwgpu.io/skip": "true"}),
        "skipped",
        None,
        [],
    ),
    ("resources-null", pod({"name": "a", "resources": None}), "skipped", None, []),
    (
        "limits-list",
        pod({"name": "a", "resources": {"limits": ["nvidia.com/gpu"]}}),
        "skipped",
        None,
        [],
    ),
    (
        "user-selector-kept",
        pod(gpu_mem(1), node_selector={"disktype": "ssd", "a/b~c": "x"}),
        "mutated",
        "GRID-P4-1Q",
        [],
    ),
]


@pytest.mark.parametrize("case_id, obj, outcome, profile, texts", CASES, ids=[c[0] for c in CASES])
def test_pod_rules(case_id, obj, outcome, profile, texts):
    original = copy.deepcopy(obj)
    decision = decide(obj, DEFAULT)
    assert obj == original, "the decision must not modify its input"
    assert (decision.outcome, decision.profile) == (outcome, profile), decision.reason
    message = decision.reason + " ".join(decision.warnings)
    for text in texts:
        assert text in message
    assert all(len(w) <= 120 for w in decision.warnings)
    if outcome == "mutated":
        assert jsonpatch.apply_patch(original, list(decision.patch)) == decision.obj
        again = decide(decision.obj, DEFAULT)
        assert again.outcome == "allowed" and again.patch == ()
    else:
        assert decision.obj is obj and decision.patch == ()
