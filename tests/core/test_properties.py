"""Properties of the decision over generated pods and workloads (hypothesis, bounded).

The objects come from tests/core/strategies.py: well-formed GPU asks mixed with what users
really send. For every object: `decide` never raises, never touches its input, its patch turns
the original into exactly the rewritten object, and the rewritten object is stable (a second
review changes nothing).
"""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.strategies import OBJECTS, POLICIES
from tests.support.builders import admission_review
from tests.support.policies import default_policies, default_policy
from webhook.admission import parse_request, review
from webhook.api.text import WARNING_LIMIT
from webhook.api.workload import dig
from webhook.core.decision import decide
from webhook.policy import PolicySet

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(obj=OBJECTS, policy=POLICIES)
def test_decide_never_raises_and_leaves_its_input_alone(obj, policy):
    """Any object gets a well-formed decision, and the caller's object is not modified."""
    before = copy.deepcopy(obj)
    decision = decide(obj, policy)
    assert obj == before
    assert decision.outcome in ("skipped", "allowed", "mutated", "denied")
    assert decision.allowed == (decision.outcome != "denied")
    if decision.outcome == "denied":
        assert decision.reason and decision.obj is obj
    assert all(len(w) <= WARNING_LIMIT for w in decision.warnings)


@PROPERTY
@given(obj=OBJECTS, policy=POLICIES)
def test_patch_turns_the_original_into_the_rewritten_object(obj, policy):
    """The JSON Patch applied to the original gives exactly `decision.obj`; none unless mutated."""
    decision = decide(obj, policy)
    ops = list(decision.patch)
    if decision.outcome != "mutated":
        assert ops == []
        return
    assert ops, "a mutation must produce a patch"
    assert decision.obj != obj
    assert jsonpatch.apply_patch(obj, ops) == decision.obj
    json.dumps(ops)  # the patch must be plain JSON


@PROPERTY
@given(obj=OBJECTS, policy=POLICIES)
def test_rewritten_objects_are_stable(obj, policy):
    """Reviewing a rewritten object again allows it unchanged (reinvocationPolicy: IfNeeded)."""
    decision = decide(obj, policy)
    if decision.outcome != "mutated":
        return
    again = decide(decision.obj, policy)
    assert again.outcome == "allowed", again.reason
    assert again.patch == ()
    assert again.profile == decision.profile


def _term_admits(term: object, labels: dict) -> bool:
    """Whether a node with `labels` (the chosen class's) can match one required affinity term.

    Only In and NotIn on those label keys are judged; other expressions depend on the node
    (DoesNotExist has its own test below).
    """
    expressions = term.get("matchExpressions") if isinstance(term, dict) else None
    for expr in expressions if isinstance(expressions, list) else []:
        if not isinstance(expr, dict) or expr.get("key") not in labels:
            continue
        value, values = labels[expr["key"]], expr.get("values") or []
        if {"In": value not in values, "NotIn": value in values}.get(expr.get("operator")):
            return False
    return True


@PROPERTY
@given(obj=OBJECTS, policy=POLICIES)
def test_rewrites_keep_the_pod_schedulable_on_the_chosen_class(obj, policy):
    """A rewritten pod keeps the user's nodeSelector and its affinity still admits the class."""
    decision = decide(obj, policy)
    if decision.outcome != "mutated":
        return
    before, after = (dig(o, decision.path) if decision.path else o for o in (obj, decision.obj))
    labels = dict(next(p for p in policy.profiles if p.name == decision.profile).node_selector)
    selector = after["spec"]["nodeSelector"]
    old = before["spec"].get("nodeSelector")
    if isinstance(old, dict):
        assert {k: selector.get(k) for k in old} == old
    assert {k: selector[k] for k in labels} == labels
    terms = dig(
        after,
        (
            "spec",
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        ),
    )
    if isinstance(terms, list) and terms:
        assert any(_term_admits(t, labels) for t in terms)


@pytest.mark.parametrize(
    ("operator", "values", "outcome"),
    [
        ("DoesNotExist", None, "denied"),
        ("Gt", ["100"], "denied"),  # the scheduler compares integers; "2048MiB" is none
        ("Gt", ["--5"], "denied"),  # no integer at all: no node matches (it raised before)
        ("Lt", ["5000"], "denied"),
        ("Exists", None, "mutated"),
        ("In", ["2048MiB"], "mutated"),
        ("NotIn", ["1024MiB", "2048MiB", "4096MiB", "8192MiB"], "denied"),
    ],
)
def test_affinity_operators_on_the_class_label(operator, values, outcome):
    """Every required-affinity operator on the class label is read as the scheduler reads it."""
    expression = {"key": "aliyun.accelerator/nvidia_mem", "operator": operator}
    if values is not None:
        expression["values"] = values
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu"},
        "spec": {
            "containers": [{"name": "cuda", "resources": {"limits": {"aliyun.com/gpu-mem": 2}}}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                    }
                }
            },
        },
    }
    decision = decide(obj, default_policy())
    assert decision.outcome == outcome
    if outcome == "denied":
        assert "affinity" in decision.reason


@PROPERTY
@given(
    obj=OBJECTS,
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
    namespace=st.sampled_from(["default", "kube-system", "team-a"]),
)
def test_admission_review_answers_every_well_formed_envelope(obj, operation, namespace):
    """`review` answers with the request's uid, and its patch decodes to the decision's ops."""
    policies = default_policies()
    body = admission_review(obj, operation=operation, namespace=namespace, uid="u-1")
    before = copy.deepcopy(body)
    result = review(parse_request(body), policies, "mutate")
    assert body == before
    answer = result.response["response"]
    assert result.response["apiVersion"] == "admission.k8s.io/v1"
    assert answer["uid"] == "u-1"
    expected = decide(
        obj,
        policies.for_namespace(namespace),
        operation=operation,
        old=body["request"]["oldObject"],
    )
    assert answer["allowed"] == expected.allowed
    if "patch" in answer:
        assert answer["patchType"] == "JSONPatch"
        assert json.loads(base64.b64decode(answer["patch"])) == list(expected.patch)
    else:
        assert expected.patch == ()


@pytest.mark.parametrize("mutate", [True, False])
@PROPERTY
@given(obj=OBJECTS)
def test_validating_review_never_patches(obj, mutate):
    """The validating endpoint (mutate=False) never sends a patch or warnings."""
    endpoint = "mutate" if mutate else "validate"
    result = review(parse_request(admission_review(obj)), PolicySet((default_policy(),)), endpoint)
    answer = result.response["response"]
    if not mutate:
        assert "patch" not in answer and "warnings" not in answer
        assert answer["allowed"] == (result.outcome != "denied")
    else:
        assert ("patch" in answer) == (result.outcome == "mutated")
