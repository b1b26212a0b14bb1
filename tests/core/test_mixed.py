"""Mixed clusters: whole-GPU pods kept off lightweight classes, classes of equal memory, and
pods another GPU-sharing system owns (issue: mixed GPU clusters, items 1-3).
"""

import copy

import pytest

from tests.cluster.apiserver_pods import ACK_PLACEMENTS
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.policies import default_policy, policy_from_yaml
from webhook.core.decision import decide

MEM = "aliyun.accelerator/nvidia_mem"
NAME = "aliyun.accelerator/nvidia_name"
HEADER = "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\nmetadata: {name: mixed}\n"
AVOID = policy_from_yaml(
    HEADER
    + """\
spec:
  wholeGPUPods: avoidLightweight
  profiles:
  - {name: GRID-P4-2Q, memory: 2Gi}
  - {name: GRID-T4-2Q, memory: 2Gi, nodeSelector: {aliyun.accelerator/nvidia_name: GRID-T4-2Q}}
  - {name: GRID-P4-4Q, memory: 4Gi}
"""
)
NOT_IN = [  # one requirement per label key the classes select on, keys in order
    {"key": MEM, "operator": "NotIn", "values": ["2048MiB", "4096MiB"]},
    {"key": NAME, "operator": "NotIn", "values": ["GRID-T4-2Q"]},
]
WHOLE = container(limits={"nvidia.com/gpu": 2})
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def affinity(*terms):
    return {
        "nodeAffinity": {
            REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}
        }
    }


def terms_of(obj):
    """The matchExpressions of each required node selector term."""
    terms = obj["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    return [term["matchExpressions"] for term in terms]


T4 = {"key": "example.com/pool", "operator": "In", "values": ["t4"]}
A100 = {"key": "example.com/pool", "operator": "In", "values": ["a100"]}


@pytest.mark.parametrize(
    ("spec", "expected_terms"),
    [
        ({}, [NOT_IN]),
        ({"affinity": affinity([T4])}, [[T4, *NOT_IN]]),
        # Terms are ORed (nodeaffinity NodeSelector.Match): every term gets the exclusion.
        ({"affinity": affinity([T4], [A100])}, [[T4, *NOT_IN], [A100, *NOT_IN]]),
        ({"affinity": affinity([T4, NOT_IN[0]])}, [[T4, NOT_IN[0], NOT_IN[1]]]),
        ({"affinity": {"podAntiAffinity": {}}}, [NOT_IN]),
    ],
    ids=["no-affinity", "one-term", "two-terms", "partly-there", "other-affinity"],
)
def test_whole_gpu_pods_are_kept_off_lightweight_classes(spec, expected_terms):
    obj = pod(WHOLE, **copy.deepcopy(spec))
    decision = decide(obj, AVOID)
    assert decision.outcome == "mutated", decision.reason
    assert terms_of(decision.obj) == expected_terms
    assert decision.warnings[0].startswith("lwgpu: nvidia.com/gpu=2 kept off lightweight")
    again = decide(decision.obj, AVOID)  # reinvocation: nothing added twice
    assert (again.outcome, again.patch) == ("allowed", ())


@pytest.mark.parametrize(
    ("obj", "policy", "outcome"),
    [
        (pod(WHOLE), default_policy(), "allowed"),  # the shipped policy: single-kind cluster
        (
            pod(container(limits={"nvidia.com/gpu": 1}), node_selector={MEM: "2048MiB"}),
            AVOID,
            "allowed",
        ),  # pins a lightweight class: already in lightweight form
        (workload("apps/v1", "Deployment", pod(WHOLE)), AVOID, "mutated"),
    ],
    ids=["default-allows", "pinned-lightweight", "workload-template"],
)
def test_when_whole_gpu_pods_are_left_as_they_are(obj, policy, outcome):
    assert decide(obj, policy).outcome == outcome


def test_classes_of_equal_memory_are_allowed_and_the_listed_order_breaks_the_tie():
    assert [p.name for p in AVOID.profiles] == ["GRID-P4-2Q", "GRID-T4-2Q", "GRID-P4-4Q"]
    assert decide(pod(gpu_mem(2)), AVOID).profile == "GRID-P4-2Q"
    swapped = policy_from_yaml(
        HEADER
        + """\
spec:
  profiles:
  - {name: GRID-T4-2Q, memory: 2Gi, nodeSelector: {aliyun.accelerator/nvidia_name: GRID-T4-2Q}}
  - {name: GRID-P4-2Q, memory: 2Gi}
"""
    )
    assert decide(pod(gpu_mem(2)), swapped).profile == "GRID-T4-2Q"


@pytest.mark.parametrize(
    ("pin", "profile"),
    [({NAME: "GRID-T4-2Q"}, "GRID-T4-2Q"), ({MEM: "2048MiB"}, "GRID-P4-2Q")],
)
def test_a_pod_that_pins_one_of_two_equal_classes_keeps_it(pin, profile):
    decision = decide(pod(gpu_mem(1), node_selector=dict(pin)), AVOID)
    assert (decision.outcome, decision.profile) == ("mutated", profile)
    assert decision.obj["spec"]["nodeSelector"].items() >= pin.items()


LEAVE = policy_from_yaml(
    HEADER
    + """\
spec:
  profiles: [{name: GRID-P4-2Q, memory: 2Gi}]
  leaveAlone:
    nodeSelectorKeys: [ack.node.gpu.schedule]
    schedulerNames: [hami-scheduler]
    podLabels: {gpushare: "true"}
"""
)
CGPU = {"key": "ack.node.gpu.schedule", "operator": "In", "values": ["cgpu"]}


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        (pod(gpu_mem(2), node_selector={"ack.node.gpu.schedule": "cgpu"}), "ack.node.gpu.schedule"),
        (pod(gpu_mem(2), affinity=affinity([CGPU])), "ack.node.gpu.schedule"),
        (pod(gpu_mem(2), schedulerName="hami-scheduler"), "hami-scheduler"),
        (
            workload(
                "apps/v1",
                "StatefulSet",
                {**pod(gpu_mem(2)), "metadata": {"labels": {"gpushare": "true"}}},
            ),
            "labels",
        ),
    ],
    ids=["cgpu-selector", "cgpu-affinity", "hami-scheduler", "gpushare-label"],
)
def test_pods_of_another_gpu_sharing_system_are_left_alone(obj, words):
    decision = decide(obj, LEAVE)
    assert decision.outcome == "skipped" and words in decision.reason
    assert decide(pod(gpu_mem(2)), LEAVE).outcome == "mutated"  # the others are still ours


@pytest.mark.parametrize(
    ("fields", "left_alone"), ACK_PLACEMENTS.values(), ids=list(ACK_PLACEMENTS)
)
def test_the_shipped_policy_leaves_to_ack_only_pods_that_must_land_on_its_nodes(fields, left_alone):
    decision = decide(pod(gpu_mem(2), **copy.deepcopy(fields)), default_policy())
    assert decision.outcome == ("skipped" if left_alone else "mutated"), decision.reason
    if left_alone:
        assert decision.reason.startswith("it selects ack.node.gpu.schedule")


def test_terms_on_different_keys_pin_the_union_of_their_classes():
    """Required terms are ORed (nodeaffinity NodeSelector.Match): each is read on its own, so
    terms pinning P4-4Q by memory and T4-2Q by name admit those two classes, not the smaller
    P4-2Q that neither term's nodes carry (hypothesis found that pod made unschedulable)."""
    both = affinity(
        [{"key": MEM, "operator": "In", "values": ["4096MiB"]}],
        [{"key": NAME, "operator": "In", "values": ["GRID-T4-2Q"]}],
    )
    decision = decide(pod(gpu_mem(1), affinity=both), AVOID)
    assert (decision.outcome, decision.profile) == ("mutated", "GRID-T4-2Q")
    neither = affinity(
        [{"key": MEM, "operator": "In", "values": ["8192MiB"]}],
        [{"key": NAME, "operator": "In", "values": ["A10"]}],
    )
    denied = decide(pod(gpu_mem(1), affinity=neither), AVOID)
    assert denied.outcome == "denied"
    assert denied.reason.startswith(
        f"spec.affinity: required node affinity {MEM} In [8192MiB] and required node affinity "
        f"{NAME} In [A10] matches no lightweight GPU class of policy 'mixed'"
    )
