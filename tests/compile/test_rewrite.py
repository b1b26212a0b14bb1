"""The rewrite as a MutatingAdmissionPolicy, read without an apiserver: its scope is the
final-state check's, it carries exactly the variables its patch reads, in an order the
apiserver compiles, and what it cannot rewrite as the webhook does is refused by name.

What the CEL does is compared with the webhook on the real kube-apiserver in
tests/cluster/test_rewrite_parity.py.
"""

from __future__ import annotations

import pytest

from tests.compile.test_final_state import DISCOVERING, FOUND, POLICY_HEAD
from tests.support.paths import EXAMPLE_POLICIES
from tests.support.policies import default_policies, policy_from_yaml
from webhook.compile import Unexpressible, final_state_check, rewrite_policy
from webhook.compile.cel import REFERENCE, used
from webhook.files import load_policies
from webhook.policy import PolicySet

MIXED = load_policies(EXAMPLE_POLICIES / "mixed-fleet.yaml")
TEAMS = load_policies(EXAMPLE_POLICIES / "per-team.yaml", EXAMPLE_POLICIES / "t4-vgpu-fleet.yaml")


def compiled(policies: PolicySet | None = None) -> tuple[dict, dict]:
    policy, binding = rewrite_policy(policies or default_policies())
    return policy, binding


def mutation(policy: dict) -> str:
    [patch] = policy["spec"]["mutations"]
    assert patch["patchType"] == "JSONPatch"
    return patch["jsonPatch"]["expression"]


def test_the_policy_and_its_binding():
    policy, binding = compiled()
    assert (policy["apiVersion"], policy["kind"]) == (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicy",
    )
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["reinvocationPolicy"] == "IfNeeded"
    assert (binding["kind"], binding["spec"]) == (
        "MutatingAdmissionPolicyBinding",
        {"policyName": "lwgpu-rewrite"},
    )
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == "lwgpu-rewrite"


@pytest.mark.parametrize("policies", [default_policies(), MIXED, TEAMS], ids=str)
def test_it_decides_the_requests_the_final_state_check_decides(policies):
    rewrite = compiled(policies)[0]["spec"]
    check = final_state_check(policies)[0]["spec"]
    assert rewrite["matchConstraints"] == check["matchConstraints"]
    assert rewrite["matchConditions"] == check["matchConditions"]


@pytest.mark.parametrize("policies", [default_policies(), MIXED, TEAMS], ids=str)
def test_it_carries_the_variables_its_patch_reads_each_after_those_it_reads(policies):
    """Every variable is read, by the patch or a variable after it; none reads a later one
    (the apiserver compiles them in order)."""
    policy = compiled(policies)[0]
    variables = policy["spec"]["variables"]
    assert used(variables, [mutation(policy)]) == variables
    defined: set[str] = set()
    for variable in variables:
        assert set(REFERENCE.findall(variable["expression"])) <= defined, variable["name"]
        defined.add(variable["name"])
    assert set(REFERENCE.findall(mutation(policy))) <= defined


def test_what_a_policy_does_not_use_is_not_compiled():
    """Tolerations and the keep-off affinity appear only for a policy that has them."""
    shipped, mixed, teams = (mutation(compiled(p)[0]) for p in (default_policies(), MIXED, TEAMS))
    assert "tolerations" not in shipped and "nodeSelectorTerms" not in shipped
    assert "nodeSelectorTerms" in mixed and "tolerations" not in mixed
    assert 'Object.spec.tolerations{key: "vgpu", operator: "Exists", effect: "NoSchedule"}' in teams


@pytest.mark.parametrize(
    ("spec", "feature"),
    [
        (
            "metadata: {name: wide}\nspec:\n  placement: spillOver\n"
            "  profiles: [{name: a, memory: 1Gi}, {name: b, memory: 2Gi}]",
            r"policy 'wide' .*placement: spillOver",
        ),
        (DISCOVERING, r"policy 'found' .*discoverProfiles: true"),
    ],
)
def test_what_it_cannot_rewrite_as_the_webhook_does_is_refused_by_name(spec, feature):
    with pytest.raises(Unexpressible, match=feature):
        rewrite_policy(PolicySet((policy_from_yaml(POLICY_HEAD + spec),)))


def test_classes_found_on_nodes_are_not_compiled_into_the_rewrite():
    """A snapshot goes stale as nodes come and go, and the rewrite is compiled ahead; the
    final-state check takes one (the sidecar compiles it again)."""
    policies = PolicySet((policy_from_yaml(POLICY_HEAD + DISCOVERING),))
    assert final_state_check(policies, discovered=FOUND)
    with pytest.raises(Unexpressible, match="discoverProfiles"):
        rewrite_policy(policies)


def test_no_policy_is_refused():
    with pytest.raises(Unexpressible, match="no policy"):
        rewrite_policy(PolicySet(()))
