"""`mode: audit` in the pure decision and in the answers built from it: every object is
decided as in enforce mode, and admitted as it came, with warnings that say what enforce mode
would have done (`would-mutate`, `would-deny`).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from tests.core.strategies import OBJECTS, POLICIES
from tests.support.builders import admission_review, container, gpu_mem, pod
from tests.support.golden import check_golden_json
from tests.support.paths import EXAMPLE_POLICIES, GOLDEN
from tests.support.policies import default_policies, default_policy, policy_from_yaml
from webhook.admission import Endpoint, parse_request, review
from webhook.api.text import WARNING_LIMIT
from webhook.core.decision import decide
from webhook.core.mode import AUDIT, REFUSAL_WARNINGS, refusal_warnings
from webhook.files import load_policies
from webhook.policy import Policy, PolicySet

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AUDITED = {"mutated": "would-mutate", "denied": "would-deny"}


def audited(policy: Policy) -> Policy:
    return replace(policy, mode="audit")


@PROPERTY
@given(obj=OBJECTS, policy=POLICIES)
def test_audit_mode_decides_as_enforce_mode_and_changes_nothing(obj, policy):
    before = copy.deepcopy(obj)
    enforced = decide(obj, policy)
    audit = decide(obj, audited(policy))
    assert obj == before
    assert audit.outcome == AUDITED.get(enforced.outcome, enforced.outcome)
    assert audit.allowed
    assert (audit.reason, audit.profile, audit.path) == (
        enforced.reason,
        enforced.profile,
        enforced.path,
    )
    assert all(len(w) <= WARNING_LIMIT for w in audit.warnings)
    if enforced.outcome not in AUDITED:
        assert audit == enforced
        return
    assert audit.obj is obj and audit.patch == ()
    if enforced.outcome == "denied":
        assert audit.warnings == refusal_warnings(enforced.reason) + enforced.warnings
        return
    # The one warning of the rewrite says what would be done; every other stays as it was.
    changed = [(a, e) for a, e in zip(audit.warnings, enforced.warnings, strict=True) if a != e]
    assert len(changed) == 1 and changed[0][0].startswith(f"{AUDIT}would ")


SPILL = """\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: spill}
spec:
  profiles: [{name: GRID-P4-2Q, memory: 2Gi}, {name: GRID-P4-4Q, memory: 4Gi}]
  placement: spillOver
"""


def mixed_fleet() -> Policy:
    return load_policies(EXAMPLE_POLICIES / "mixed-fleet.yaml").policies[0]


@pytest.mark.parametrize(
    ("policy", "obj", "outcome", "warnings"),
    [
        (
            default_policy,
            pod(gpu_mem(2)),
            "would-mutate",
            ["lwgpu (audit): would rewrite aliyun.com/gpu-mem=2 -> nvidia.com/gpu=1 on GRID-P4-2Q"],
        ),
        (
            lambda: policy_from_yaml(SPILL),
            pod(gpu_mem(1)),
            "would-mutate",
            [
                "lwgpu (audit): would rewrite aliyun.com/gpu-mem=1 -> nvidia.com/gpu=1 on "
                "GRID-P4-2Q, spilling over to GRID-P4-4Q"
            ],
        ),
        (
            mixed_fleet,
            pod(container(limits={"nvidia.com/gpu": 2})),
            "would-mutate",
            ["lwgpu (audit): would keep nvidia.com/gpu=2 off lightweight GPU classes"],
        ),
        (
            default_policy,
            pod(gpu_mem(64)),
            "would-deny",
            [
                "lwgpu (audit): would refuse: spec.containers[0].resources: containers[0] (cuda) "
                "asks aliyun.com/gpu-mem=64 (65536Mi),",
                "lwgpu (audit): more than the largest lightweight GPU GRID-P4-8Q (8192Mi) of "
                "policy 'default'; ask for at most",
                "lwgpu (audit): aliyun.com/gpu-mem: 8 (units of 1Gi)",
            ],
        ),
        # In lightweight form already: nothing to say, in either mode.
        (
            default_policy,
            pod(
                container(limits={"nvidia.com/gpu": 1}),
                node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"},
            ),
            "allowed",
            [],
        ),
    ],
    ids=["rewrite", "spill-over", "keep-off", "refusal", "lightweight-form"],
)
def test_what_audit_mode_says(policy, obj, outcome, warnings):
    decision = decide(obj, audited(policy()))
    assert (decision.outcome, list(decision.warnings)) == (outcome, warnings)


def test_a_refusal_is_wrapped_whole_into_warnings_and_cut_only_past_their_number():
    reason = " ".join(f"word{i}" for i in range(60))
    lines = refusal_warnings(reason)
    assert lines[0].startswith(f"{AUDIT}would refuse: word0 ")
    assert all(w.startswith(AUDIT) and len(w) <= WARNING_LIMIT for w in lines)
    assert (
        " ".join(w.removeprefix(f"{AUDIT}would refuse: ").removeprefix(AUDIT) for w in lines)
        == reason
    )
    endless = refusal_warnings(reason * 20)
    assert len(endless) == REFUSAL_WARNINGS and endless[-1].endswith(" …")


# --- the answers -----------------------------------------------------------------------

TRIAL = """\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: trial}
spec:
  namespaces: {include: [trial]}
  profiles:
  - {name: GRID-P4-1Q, memory: 1Gi}
  - {name: GRID-P4-2Q, memory: 2Gi}
  - {name: GRID-P4-8Q, memory: 8Gi}
  mode: audit
"""


def with_trial() -> PolicySet:
    """The shipped policy, and a policy that only audits namespace `trial`."""
    return PolicySet((*default_policies().policies, policy_from_yaml(TRIAL)))


def answer(obj: Any, namespace: str, endpoint: Endpoint) -> dict[str, Any]:
    request = parse_request(admission_review(obj, namespace=namespace, uid="u-1"))
    result = review(request, with_trial(), endpoint)
    return {"decision": result.outcome, **result.response["response"]}


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_an_audited_namespace_is_answered_allowed_without_a_patch(endpoint):
    for obj in (pod(gpu_mem(2)), pod(gpu_mem(64)), pod(gpu_mem(2), nodeName="n1")):
        got = answer(obj, "trial", endpoint)
        assert got["allowed"] is True and "patch" not in got and "status" not in got
        assert got["decision"] in ("would-mutate", "would-deny")
        # The validating webhook answers without warnings in either mode: the mutating one
        # said it already.
        assert ("warnings" in got) is (endpoint == "mutate")
    # Beside it, the shipped policy still enforces.
    assert answer(pod(gpu_mem(64)), "default", endpoint)["allowed"] is False


def test_golden_answers_in_an_audited_namespace():
    answers = {
        name: {e: answer(obj, "trial", e) for e in ("mutate", "validate")}
        for name, obj in (("would-mutate", pod(gpu_mem(2))), ("would-deny", pod(gpu_mem(64))))
    }
    check_golden_json(GOLDEN / "admission" / "audit-mode.json", orjson.dumps(answers))
