"""Properties of the decision over generated pods and workloads (hypothesis, bounded).

The generator mixes well-formed GPU asks with what users really send: quantities
as ints, strings, floats, garbage, None and lists; `resources: null`, `{}` or a
list; missing `spec`; label and annotation keys containing `/` and `~`; sidecars.
For every object: `decide` never raises, never touches its input, its patch turns
the original into exactly the rewritten object, and the rewritten object is
stable (a second review changes nothing).
"""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.builders import WORKLOAD_KINDS, admission_review, workload
from tests.support.policies import default_policies, default_policy, tainted_policy
from webhook.admission import review
from webhook.api.workload import dig
from webhook.core.decision import WARNING_LIMIT, decide
from webhook.policy import PolicySet

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ("cuda", "app", "sidecar", "a/b~c")
# Odd values users write; the decision must decide or deny with a message, never raise.
ODD_QUANTITIES = st.one_of(
    st.integers(-2, 20000),
    st.sampled_from(
        [
            "1",
            "2",
            "1.5Gi",
            "500M",
            "2e3",
            "1536Mi",
            "2048",
            "3000",
            "0",
            "-1",
            "0.5",
            "9Gi",
            "1e999",
            "2Gi ",
            "abc",
            "",
            "NaN",
            "1_000",
            "16276",
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.none(),
    st.booleans(),
    st.lists(st.integers(0, 3), max_size=2),
)
ODD_MAP = st.one_of(
    st.dictionaries(
        st.sampled_from(
            ["aliyun.com/gpu-mem", "nvidia.com/gpumem", "nvidia.com/gpu", "cpu", "memory"]
        ),
        ODD_QUANTITIES,
        max_size=3,
    ),
    st.none(),
    st.just([]),
    st.just("2"),
)
# Plausible asks, so that rewrites (not only refusals) are explored often.
GPU_MAP = st.one_of(
    st.fixed_dictionaries({"aliyun.com/gpu-mem": st.sampled_from([1, 2, "2", 4, 8, 9])}),
    st.fixed_dictionaries({"nvidia.com/gpumem": st.sampled_from([1000, "2048", 3000, 8192])}),
    st.fixed_dictionaries({"nvidia.com/gpu": st.sampled_from([1, "1", 0, 2])}),
    st.fixed_dictionaries(
        {"nvidia.com/gpu": st.just(1), "nvidia.com/gpumem": st.just(1536), "cpu": st.just("500m")}
    ),
)
RESOURCES = st.one_of(
    st.fixed_dictionaries({"limits": GPU_MAP}),
    st.fixed_dictionaries({"limits": GPU_MAP, "requests": GPU_MAP}),
    st.fixed_dictionaries({"requests": GPU_MAP}),
    st.fixed_dictionaries({}, optional={"limits": ODD_MAP, "requests": ODD_MAP}),
    st.none(),
    st.just({}),
    st.just([{"nvidia.com/gpu": 1}]),
)
CONTAINER = st.one_of(
    *(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(NAMES),
                "image": st.just("nvidia/cuda:12.4.1-base-ubuntu22.04"),
                **required,
            },
            optional={"restartPolicy": st.sampled_from(["Always", "Never"]), **optional},
        )
        for required, optional in (({"resources": RESOURCES}, {}), ({}, {"resources": RESOURCES}))
    )
)
CONTAINERS = st.one_of(
    st.lists(CONTAINER, min_size=1, max_size=2),
    st.lists(CONTAINER, min_size=1, max_size=3),
    st.lists(st.one_of(CONTAINER, st.none(), st.just("cuda")), max_size=2),
    st.none(),
)
CLASS_VALUES = st.sampled_from(
    ["1024MiB", "2048MiB", "4096MiB", "8192MiB", "16384MiB", "t4-4q", "x"]
)
LABEL_KEYS = st.sampled_from(
    ["aliyun.accelerator/nvidia_mem", "example.com/gpu-class", "a/b~c", "x~1y/z", "team"]
)
NODE_SELECTOR = st.one_of(
    st.dictionaries(LABEL_KEYS, st.one_of(CLASS_VALUES, st.integers()), max_size=3),
    st.none(),
    st.just(["aliyun.accelerator/nvidia_mem"]),
)
EXPRESSION = st.fixed_dictionaries(
    {
        "key": LABEL_KEYS,
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": st.one_of(st.lists(CLASS_VALUES, max_size=3), st.none()),
    }
)
AFFINITY = st.builds(
    lambda terms: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": exprs} for exprs in terms]
            }
        }
    },
    st.lists(st.lists(EXPRESSION, min_size=1, max_size=2), min_size=1, max_size=2),
)
ANNOTATIONS = st.one_of(
    st.none(),
    st.just({}),
    st.just({"a/b~c": "kept"}),
    st.fixed_dictionaries(
        {},
        optional={
            "lwgpu.io/gpu-memory": st.one_of(
                st.sampled_from(["1536Mi", "2Gi", "3000Mi", "1024", "9Gi", "abc", "0"]),
                st.integers(),
            ),
            "lwgpu.io/container": st.sampled_from((*NAMES, "missing")),
            "lwgpu.io/skip": st.sampled_from(["true", "false", "false"]),
        },
    ),
)
TOLERATIONS = st.one_of(
    st.none(),
    st.just([]),
    st.just([{"key": "example.com/lightweight-gpu", "operator": "Exists", "effect": "NoSchedule"}]),
)
SPEC = st.fixed_dictionaries(
    {"containers": CONTAINERS},
    optional={
        "initContainers": CONTAINERS,
        "nodeSelector": NODE_SELECTOR,
        "affinity": AFFINITY,
        "nodeName": st.just("node-1"),
        "tolerations": TOLERATIONS,
    },
)
POD = st.builds(
    lambda meta, spec: {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        **({} if spec is None else {"spec": spec}),
    },
    st.fixed_dictionaries({"name": st.just("gpu")}, optional={"annotations": ANNOTATIONS}),
    st.one_of(SPEC, SPEC, SPEC, st.none()),
)
OBJECTS = st.builds(lambda kind, pod: workload(*kind, pod), st.sampled_from(WORKLOAD_KINDS), POD)
POLICIES = st.sampled_from([default_policy(), tainted_policy()])


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
    result = review(body, policies)
    assert body == before
    answer = result.response["response"]
    assert result.response["apiVersion"] == "admission.k8s.io/v1"
    assert answer["uid"] == "u-1"
    expected = decide(obj, policies.for_namespace(namespace), operation=operation)
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
    result = review(admission_review(obj), PolicySet((default_policy(),)), mutate=mutate)
    answer = result.response["response"]
    if not mutate:
        assert "patch" not in answer and "warnings" not in answer
        assert answer["allowed"] == (result.decision != "denied")
    else:
        assert ("patch" in answer) == (result.decision == "mutated")
