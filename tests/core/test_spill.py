"""Spill-over placement (`spec.placement: spillOver`, issue 16 item 4): a required node
affinity on every class that fits, merged into every existing term, preferred weights for
the smallest; nothing added on reinvocation; pins, the webhook's own choice and
`wholeGPUPods: avoidLightweight` stay coherent.
"""

import copy

import pytest

from tests.support.builders import container, gpu_mem, pod
from tests.support.policies import default_policy, policy_from_yaml
from webhook.core.decision import decide

MEM = "aliyun.accelerator/nvidia_mem"
NAME = "aliyun.accelerator/nvidia_name"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
HEADER = "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\nmetadata: {name: spill}\n"
SPILL = policy_from_yaml(
    HEADER
    + """\
spec:
  placement: spillOver
  wholeGPUPods: avoidLightweight
  profiles:
  - {name: GRID-P4-1Q, memory: 1Gi}
  - {name: GRID-P4-2Q, memory: 2Gi}
  - {name: GRID-P4-4Q, memory: 4Gi}
  - {name: GRID-P4-8Q, memory: 8Gi}
"""
)
# A T4 class selecting on its name beside P4 classes selecting on memory: two keys.
TWO_KEYS = policy_from_yaml(
    HEADER
    + """\
spec:
  placement: spillOver
  wholeGPUPods: avoidLightweight
  profiles:
  - {name: GRID-P4-2Q, memory: 2Gi}
  - name: GRID-T4-4Q
    memory: 4Gi
    nodeSelector: {aliyun.accelerator/nvidia_name: GRID-T4-4Q}
    tolerations: [{key: example.com/t4, operator: Exists, effect: NoSchedule}]
  - {name: GRID-P4-8Q, memory: 8Gi}
"""
)


def mem_in(*gib):
    return {"key": MEM, "operator": "In", "values": [f"{g * 1024}MiB" for g in gib]}


def name_in(name):
    return {"key": NAME, "operator": "In", "values": [name]}


def prefer(weight, expression):
    return {"weight": weight, "preference": {"matchExpressions": [expression]}}


def affinity(*terms):
    return {
        "nodeAffinity": {
            REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}
        }
    }


def node_affinity(obj):
    return obj["spec"]["affinity"]["nodeAffinity"]


def terms_of(obj):
    return [t["matchExpressions"] for t in node_affinity(obj)[REQUIRED]["nodeSelectorTerms"]]


ZONE_A = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
ZONE_B = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}


@pytest.mark.parametrize(
    ("policy", "gib", "spec", "expected_terms"),
    [
        (SPILL, 2, {}, [[mem_in(2, 4, 8)]]),
        (SPILL, 3, {}, [[mem_in(4, 8)]]),
        (SPILL, 8, {}, [[mem_in(8)]]),
        (SPILL, 1, {"affinity": affinity([ZONE_A])}, [[ZONE_A, mem_in(1, 2, 4, 8)]]),
        # Terms are ORed: the classes go into every one of them.
        (
            SPILL,
            4,
            {"affinity": affinity([ZONE_A], [ZONE_B])},
            [[ZONE_A, mem_in(4, 8)], [ZONE_B, mem_in(4, 8)]],
        ),
        # Classes on two keys are two ways onto a node: one term each.
        (TWO_KEYS, 2, {}, [[mem_in(2, 8)], [name_in("GRID-T4-4Q")]]),
        (TWO_KEYS, 3, {}, [[name_in("GRID-T4-4Q")], [mem_in(8)]]),
        (
            TWO_KEYS,
            2,
            {"affinity": affinity([ZONE_A], [ZONE_B])},
            [
                [ZONE_A, mem_in(2, 8)],
                [ZONE_A, name_in("GRID-T4-4Q")],
                [ZONE_B, mem_in(2, 8)],
                [ZONE_B, name_in("GRID-T4-4Q")],
            ],
        ),
    ],
    ids=[
        "2Gi",
        "3Gi",
        "largest",
        "one-term",
        "two-terms",
        "two-keys",
        "two-keys-3Gi",
        "two-keys-two-terms",
    ],
)
def test_spill_over_affinity(policy, gib, spec, expected_terms):
    obj = pod(gpu_mem(gib), **copy.deepcopy(spec))
    decision = decide(obj, policy)
    assert decision.outcome == "mutated", decision.reason
    assert terms_of(decision.obj) == expected_terms
    assert "nodeSelector" not in decision.obj["spec"] or not decision.obj["spec"]["nodeSelector"]
    again = decide(decision.obj, policy)  # reinvocation: nothing added, not kept off either
    assert (again.outcome, again.patch) == ("allowed", ()), again.reason


def test_preferred_weights_favour_the_smallest_fitting_class():
    decision = decide(pod(gpu_mem(2)), SPILL)
    assert node_affinity(decision.obj)[PREFERRED] == [
        prefer(100, mem_in(2)),
        prefer(66, mem_in(4)),
        prefer(33, mem_in(8)),
    ]
    assert decision.profile == "GRID-P4-2Q"
    assert decision.reason.endswith(
        "on GRID-P4-2Q (aliyun.accelerator/nvidia_mem=2048MiB), "
        "spilling over to GRID-P4-4Q, GRID-P4-8Q"
    )


def test_the_tolerations_of_every_fitting_class_are_added():
    """Where the pods may then land, kube-scheduler shows: tests/cluster/test_mixed_fleet.py."""
    spec = decide(pod(gpu_mem(2)), TWO_KEYS).obj["spec"]
    # The T4 class's taint is tolerated: the pod may be placed there.
    assert spec["tolerations"] == [
        {"key": "example.com/t4", "operator": "Exists", "effect": "NoSchedule"}
    ]


@pytest.mark.parametrize(
    ("pin", "expected_terms", "profile"),
    [
        # A pin keeps its class: the spill set is what the pin admits and fits.
        ({"nodeSelector": {NAME: "GRID-T4-4Q"}}, [[name_in("GRID-T4-4Q")]], "GRID-T4-4Q"),
        (
            {"affinity": affinity([{"key": MEM, "operator": "In", "values": ["8192MiB"]}])},
            [[mem_in(8)]],
            "GRID-P4-8Q",
        ),
    ],
    ids=["nodeSelector-pin", "affinity-pin"],
)
def test_pins_narrow_the_spill(pin, expected_terms, profile):
    obj = pod(gpu_mem(2), **copy.deepcopy(pin))
    decision = decide(obj, TWO_KEYS)
    assert (decision.outcome, decision.profile) == ("mutated", profile)
    assert terms_of(decision.obj) == expected_terms
    assert decide(decision.obj, TWO_KEYS).patch == ()


def test_a_grown_ask_narrows_the_earlier_spill():
    """The webhook's earlier affinity is kept; a larger ask only narrows it (ANDed)."""
    first = decide(pod(container(), annotations={"lwgpu.io/gpu-memory": "1Gi"}), SPILL)
    assert terms_of(first.obj) == [[mem_in(1, 2, 4, 8)]]
    grown = copy.deepcopy(first.obj)
    grown["metadata"]["annotations"]["lwgpu.io/gpu-memory"] = "3Gi"
    decision = decide(grown, SPILL)
    assert decision.profile == "GRID-P4-4Q"
    assert terms_of(decision.obj) == [[mem_in(1, 2, 4, 8), mem_in(4, 8)]]
    assert decide(decision.obj, SPILL).patch == ()


def test_a_selector_chosen_exactly_before_is_replaced_by_the_spill():
    """A pod rewritten under `exact` and reviewed again under `spillOver` (policy changed)."""
    exact = decide(pod(container(), annotations={"lwgpu.io/gpu-memory": "2Gi"}), default_policy())
    decision = decide(exact.obj, SPILL)
    assert decision.obj["spec"]["nodeSelector"] == {}
    assert terms_of(decision.obj) == [[mem_in(2, 4, 8)]]


def test_whole_gpu_pods_are_still_kept_off_every_class():
    decision = decide(pod(container(limits={"nvidia.com/gpu": 2})), SPILL)
    assert decision.outcome == "mutated"
    assert terms_of(decision.obj) == [
        [{"key": MEM, "operator": "NotIn", "values": ["1024MiB", "2048MiB", "4096MiB", "8192MiB"]}]
    ]
    assert PREFERRED not in node_affinity(decision.obj)


def test_exact_is_the_default_and_writes_the_seed_selector():
    decision = decide(pod(gpu_mem(2)), default_policy())
    assert decision.obj["spec"]["nodeSelector"] == {MEM: "2048MiB"}
    assert "affinity" not in decision.obj["spec"]
