"""Objects over their life in a real cluster: UPDATEs, controller-made objects, mirror pods,
and the selector the webhook wrote itself (issue: real cluster lifecycle).

Each case names the Kubernetes source its expectation rests on; see `webhook/core/lifecycle.py`.
"""

import copy

import pytest

from tests.support.builders import admission_review, gpu_mem, pod, workload
from tests.support.policies import default_policies, default_policy, policy_from_yaml
from webhook.admission import parse_request, review
from webhook.core.decision import decide

DEFAULT = default_policy()
MEM = "aliyun.accelerator/nvidia_mem"
NAME = "aliyun.accelerator/nvidia_name"


def owned(obj: dict, api_version: str, kind: str, controller: bool = True) -> dict:
    """`obj` with an ownerReference to a `kind` named `owner`, as its controller or not."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": api_version,
            "kind": kind,
            "name": "owner",
            "uid": "u-1",
            "controller": controller,
        }
    ]
    return obj


def mirror(obj: dict) -> dict:
    """A mirror pod as the kubelet creates it for a static pod: annotation and nodeName set."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "5f3c9e"}
    obj["spec"]["nodeName"] = "gpu-node-1"
    return obj


DEPLOYMENT = workload("apps/v1", "Deployment", pod(gpu_mem(2)))
REPLICA_SET = workload("apps/v1", "ReplicaSet", pod(gpu_mem(2)))
JOB = workload("batch/v1", "Job", pod(gpu_mem(2)))


def scaled(obj: dict) -> dict:
    """`obj` after a scale: spec.replicas changes, the template does not."""
    obj = copy.deepcopy(obj)
    obj["spec"]["replicas"] = 5
    return obj


def relabelled(obj: dict) -> dict:
    """`obj` after `kubectl label` and a finalizer removal: only metadata changes."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["labels"] = {"team": "ml"}
    obj["metadata"]["finalizers"] = []
    return obj


def restarted(obj: dict) -> dict:
    """`obj` after `kubectl rollout restart`: an annotation on the pod template changes."""
    obj = copy.deepcopy(obj)
    template = obj["spec"]["template"]
    template["metadata"] = {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-03"}}
    return obj


# (case, object, operation, oldObject, outcome, words in the reason)
CASES = [
    # pkg/apis/core/validation ValidatePodSpecificAnnotationUpdates: the mirror is the
    # kubelet's; refusing it only makes the kubelet retry.
    ("mirror pod", mirror(pod(gpu_mem(2))), "CREATE", None, "skipped", "mirror pod"),
    # deployment_util.go FindNewReplicaSet / EqualIgnoreHash: a rewritten ReplicaSet no
    # longer matches its Deployment's template.
    (
        "ReplicaSet of a Deployment, CREATE",
        owned(REPLICA_SET, "apps/v1", "Deployment"),
        "CREATE",
        None,
        "skipped",
        "controller Deployment owner",
    ),
    (
        "ReplicaSet of a Deployment, scaled (sync.go scaleReplicaSet)",
        scaled(owned(REPLICA_SET, "apps/v1", "Deployment")),
        "UPDATE",
        owned(REPLICA_SET, "apps/v1", "Deployment"),
        "skipped",
        "controller Deployment",
    ),
    (
        "Job of a CronJob",
        owned(JOB, "batch/v1", "CronJob"),
        "CREATE",
        None,
        "skipped",
        "controller CronJob",
    ),
    (
        "ReplicaSet owned but not controlled",
        owned(REPLICA_SET, "apps/v1", "Deployment", False),
        "CREATE",
        None,
        "mutated",
        "",
    ),
    (
        "ReplicaSet of an unknown controller",
        owned(REPLICA_SET, "example.com/v1", "Rollout"),
        "CREATE",
        None,
        "mutated",
        "",
    ),
    # pkg/apis/batch/validation ValidateJobSpecUpdate -> validatePodTemplateUpdate.
    ("Job UPDATE (label)", relabelled(JOB), "UPDATE", JOB, "skipped", "Job's pod template"),
    ("Job UPDATE without oldObject", JOB, "UPDATE", None, "skipped", "Job's pod template"),
    (
        "Deployment scaled, created before the webhook",
        scaled(DEPLOYMENT),
        "UPDATE",
        DEPLOYMENT,
        "skipped",
        "did not change",
    ),
    (
        "Deployment relabelled, finalizers removed",
        relabelled(DEPLOYMENT),
        "UPDATE",
        DEPLOYMENT,
        "skipped",
        "did not change",
    ),
    ("Deployment rollout restart", restarted(DEPLOYMENT), "UPDATE", DEPLOYMENT, "mutated", ""),
    ("Deployment UPDATE without oldObject", DEPLOYMENT, "UPDATE", None, "mutated", ""),
    ("Deployment CREATE", DEPLOYMENT, "CREATE", None, "mutated", ""),
]


@pytest.mark.parametrize(
    ("obj", "operation", "old", "outcome", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_lifecycle(obj, operation, old, outcome, words):
    decision = decide(obj, DEFAULT, operation=operation, old=old)
    assert decision.outcome == outcome, decision.reason
    assert all(word in decision.reason for word in words.split())
    if outcome == "skipped":
        assert decision.obj is obj and decision.patch == ()


@pytest.mark.parametrize(
    ("obj", "operation", "old", "outcome", "words"),
    [case[1:] for case in CASES if case[4] == "skipped"],
    ids=[case[0] for case in CASES if case[4] == "skipped"],
)
@pytest.mark.parametrize("mutate", [True, False], ids=["mutate", "validate"])
def test_left_alone_on_both_endpoints(obj, operation, old, outcome, words, mutate):
    """What /mutate leaves alone, /validate must not refuse: else the refusal only moves."""
    body = admission_review(obj, operation=operation)
    body["request"]["oldObject"] = old
    endpoint = "mutate" if mutate else "validate"
    answer = review(parse_request(body), default_policies(), endpoint).response["response"]
    assert answer["allowed"] is True
    assert "patch" not in answer and "status" not in answer


def applied(previous: dict, gib: int) -> dict:
    """What client-side `kubectl apply` stores after changing the ask to `gib`: the three-way
    merge (kubectl apply, `last-applied-configuration`) keeps every field it did not write,
    the webhook's nodeSelector, GPU count and annotations included, and sets the new ask."""
    obj = copy.deepcopy(previous)
    obj["spec"]["containers"][0]["resources"]["limits"]["aliyun.com/gpu-mem"] = gib
    return obj


@pytest.mark.parametrize(
    ("first", "then", "profile", "selector"),
    [
        (2, 4, "GRID-P4-4Q", "4096MiB"),
        (4, 1, "GRID-P4-1Q", "1024MiB"),
        (2, 2, "GRID-P4-2Q", "2048MiB"),
        (8, 2, "GRID-P4-2Q", "2048MiB"),
    ],
)
def test_a_changed_ask_chooses_again(first, then, profile, selector):
    """The webhook's own selector is its earlier choice, not the user's pin."""
    created = decide(pod(gpu_mem(first)), DEFAULT)
    assert created.outcome == "mutated"
    decision = decide(applied(created.obj, then), DEFAULT)
    assert decision.outcome == "mutated" and decision.profile == profile
    assert decision.obj["spec"]["nodeSelector"] == {MEM: selector}
    assert decision.obj["metadata"]["annotations"]["lwgpu.io/profile"] == profile
    again = decide(decision.obj, DEFAULT)
    assert again.outcome == "allowed" and again.patch == ()


def test_a_user_pin_beside_the_webhook_selector_stays_a_pin():
    """Only the exact selector of the class named by lwgpu.io/profile is the webhook's own."""
    created = decide(pod(gpu_mem(2)), DEFAULT).obj
    changed = applied(created, 4)
    changed["metadata"]["annotations"]["lwgpu.io/profile"] = "GRID-P4-4Q"  # names another class
    decision = decide(changed, DEFAULT)
    assert decision.outcome == "denied"
    assert "pins GRID-P4-2Q" in decision.reason and "pin GRID-P4-4Q" in decision.reason


@pytest.mark.parametrize(
    ("gib", "outcome", "selector", "words"),
    [
        (4, "denied", None, "pins GRID-P4-2Q remove the selector or pin GRID-P4-4Q"),
        (2, "mutated", {NAME: "GRID-P4-2Q", MEM: "2048MiB"}, ""),
        (1, "mutated", {NAME: "GRID-P4-2Q", MEM: "2048MiB"}, ""),
    ],
)
def test_a_pin_by_the_cloud_name_label(gib, outcome, selector, words):
    """nvidia_name pins a class too (nodeLabels): never add a selector no node matches."""
    decision = decide(pod(gpu_mem(gib), node_selector={NAME: "GRID-P4-2Q"}), DEFAULT)
    assert decision.outcome == outcome, decision.reason
    assert all(word in decision.reason for word in words.split())
    if selector is not None:
        assert decision.obj["spec"]["nodeSelector"] == selector


MIXED = policy_from_yaml("""\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: mixed}
spec:
  profiles:
  - {name: GRID-P4-2Q, memory: 2Gi, nodeSelector: {aliyun.accelerator/nvidia_mem: 2048MiB}}
  - {name: GRID-T4-4Q, memory: 4Gi, nodeSelector: {aliyun.accelerator/nvidia_name: GRID-T4-4Q}}
  - {name: GRID-T4-8Q, memory: 8Gi, nodeSelector: {aliyun.accelerator/nvidia_name: GRID-T4-8Q}}
""")


@pytest.mark.parametrize(
    ("gib", "pin", "outcome", "selector"),
    [
        (2, {MEM: "2048MiB"}, "mutated", {MEM: "2048MiB"}),
        (4, {MEM: "2048MiB"}, "denied", None),  # T4-4Q's nvidia_mem is unknown: no guess
        (2, {NAME: "GRID-T4-4Q"}, "mutated", {NAME: "GRID-T4-4Q"}),
        (4, {NAME: "GRID-T4-8Q"}, "mutated", {NAME: "GRID-T4-8Q"}),
        (2, None, "mutated", {MEM: "2048MiB"}),
        (3, None, "mutated", {NAME: "GRID-T4-4Q"}),
    ],
)
def test_classes_selecting_on_different_keys(gib, pin, outcome, selector):
    """A pin on a key some class uses admits only classes known to carry the pinned value."""
    decision = decide(pod(gpu_mem(gib), node_selector=pin), MIXED)
    assert decision.outcome == outcome, decision.reason
    if selector is not None:
        assert decision.obj["spec"]["nodeSelector"] == selector
