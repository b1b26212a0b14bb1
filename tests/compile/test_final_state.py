"""The final-state ValidatingAdmissionPolicy as compiled, read without an apiserver: its scope
equals the webhook's, its CEL follows the rules the apiserver applies when it validates a
policy, and each policy value becomes the literal the checks read.

What the CEL decides is tested against the real kube-apiserver in
tests/cluster/test_final_state.py.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml

from tests.support.paths import DEPLOY, EXAMPLE_POLICIES
from tests.support.policies import default_policies, policy_from_yaml
from webhook.compile import Unexpressible, final_state_check
from webhook.compile.cel import dig, maps, string
from webhook.compile.scope import governing, reviewed_controller
from webhook.compile.values import units_held
from webhook.files import load_policies
from webhook.policy import PolicySet, Profile, frozen_map

POLICY_HEAD = "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\n"
REFERENCE = re.compile(r"variables\.([A-Za-z_][A-Za-z0-9_]*)")


def compiled(policies: PolicySet | None = None) -> tuple[dict, dict]:
    policy, binding = final_state_check(policies or default_policies())
    return policy, binding


def policies_from(*documents: str) -> PolicySet:
    return PolicySet(tuple(policy_from_yaml(POLICY_HEAD + d) for d in documents))


def variable(policy: dict, name: str) -> str:
    [expression] = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == name]
    return expression


def every_expression(policy: dict) -> list[str]:
    spec = policy["spec"]
    return [
        *(v["expression"] for v in spec["variables"]),
        *(c["expression"] for c in spec["matchConditions"]),
        *(v[key] for v in spec["validations"] for key in ("expression", "messageExpression")),
    ]


def test_the_policy_and_its_binding():
    policy, binding = compiled()
    assert (policy["apiVersion"], policy["kind"]) == (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
    )
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["kind"] == "ValidatingAdmissionPolicyBinding"
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert binding["metadata"]["name"] == policy["metadata"]["name"] == "lwgpu-final-state"


def test_it_matches_the_requests_the_webhook_is_sent():
    """The rules and namespaces of deploy/base/webhook-scope.yaml, which both webhooks use."""
    patches = yaml.safe_load((DEPLOY / "base" / "webhook-scope.yaml").read_text())
    sent = {p["path"].rsplit("/", 1)[1]: p["value"] for p in patches}
    constraints = compiled()[0]["spec"]["matchConstraints"]
    assert constraints["resourceRules"] == sent["rules"]
    assert constraints["namespaceSelector"] == sent["namespaceSelector"]


def _cel(text: str) -> str:
    """CEL text with the spacing and the quotes of its string literals made alike."""
    return re.sub(r"\s+", "", text).replace('"', "'")


def test_the_webhook_is_not_sent_what_a_reviewed_workload_controls():
    """The webhook's match condition and the check's scope read a controller alike."""
    patches = yaml.safe_load((DEPLOY / "base" / "webhook-scope.yaml").read_text())
    [conditions] = [p["value"] for p in patches if p["path"].endswith("/matchConditions")]
    [expression] = [
        c["expression"] for c in conditions if c["name"] == "not-left-alone-whatever-it-holds"
    ]
    assert _cel(f"!{reviewed_controller()}") in _cel(expression)


def test_a_variable_reads_only_variables_defined_before_it():
    """The apiserver compiles variables in order, each seeing those before it
    (staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/composition.go,
    `CompileAndStoreVariables`)."""
    defined: set[str] = set()
    for entry in compiled()[0]["spec"]["variables"]:
        assert set(REFERENCE.findall(entry["expression"])) <= defined, entry["name"]
        defined.add(entry["name"])
    policy = compiled()[0]
    for expression in every_expression(policy):
        assert set(REFERENCE.findall(expression)) <= defined


def test_match_conditions_read_no_variables():
    """Match conditions are validated with a compiler that has no variables
    (pkg/apis/admissionregistration/validation/validation.go,
    `validateMatchConditionsExpression`: `getStrictStatelessCELCompiler`)."""
    for condition in compiled()[0]["spec"]["matchConditions"]:
        assert "variables." not in condition["expression"], condition["name"]


def test_messages_are_one_line():
    """A message with a line break is dropped for the static one (staging/src/k8s.io/apiserver/
    pkg/admission/plugin/policy/validating/validator.go, `Validate`)."""
    for validation in compiled()[0]["spec"]["validations"]:
        assert "\n" not in validation["message"]
        assert any(w in validation["message"] for w in ("did not rewrite", "GPUs", "spec.nodeName"))


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    [
        ('{include: ["*"]}', "true ? 0\n: -1"),
        (
            '{include: ["*"], exclude: ["kube-system"]}',
            '!(request.namespace == "kube-system") ? 0\n: -1',
        ),
        ('{include: ["lab-??"]}', 'request.namespace.matches("^lab-..$") ? 0\n: -1'),
        (
            '{include: ["team-*", "team-a"], exclude: ["team-x*"]}',
            'request.namespace == "team-a" && !(request.namespace.matches("^team-x.*$")) ? 0\n'
            ': request.namespace.matches("^team-.*$") && !(request.namespace.matches("^team-x.*$"))'
            " ? 0\n: -1",
        ),
    ],
)
def test_namespace_globs_become_cel(namespaces, expected):
    spec = (
        f"metadata: {{name: p}}\nspec:\n  namespaces: {namespaces}\n"
        "  profiles: [{name: a, memory: 1Gi}]"
    )
    assert governing(policies_from(spec)) == expected


def test_the_most_specific_include_of_any_policy_governs():
    """PolicySet.for_namespace: an exact name beats a glob, a longer glob a shorter one."""
    broad = "metadata: {name: broad}\nspec:\n  profiles: [{name: a, memory: 1Gi}]"
    team = (
        "metadata: {name: team}\nspec:\n  namespaces: {include: [team-*], exclude: [team-x]}\n"
        "  profiles: [{name: b, memory: 2Gi}]"
    )
    exact = (
        "metadata: {name: exact}\nspec:\n  namespaces: {include: [team-x]}\n"
        "  profiles: [{name: c, memory: 4Gi}]"
    )
    chain = governing(policies_from(broad, team, exact)).split("\n")
    assert chain == [
        'request.namespace == "team-x" ? 2',
        ': request.namespace.matches("^team-.*$") && !(request.namespace == "team-x") ? 1',
        ": true ? 0",
        ": -1",
    ]


def test_the_shipped_policy_values():
    policy = compiled()[0]
    assert variable(policy, "memoryResources") == '["aliyun.com/gpu-mem", "nvidia.com/gpumem"]'
    assert variable(policy, "memoryAnnotation") == '"lwgpu.io/gpu-memory"'
    assert variable(policy, "maxGPUs") == "1"
    assert variable(policy, "classMemory") == (
        '{"GRID-P4-1Q": "1024Mi", "GRID-P4-2Q": "2048Mi", "GRID-P4-4Q": "4096Mi", '
        '"GRID-P4-8Q": "8192Mi"}'
    )
    assert variable(policy, "classKeys") == (
        '["aliyun.accelerator/nvidia_mem", "aliyun.accelerator/nvidia_name"]'
    )
    assert variable(policy, "leaveNodeKeys") == '["ack.node.gpu.schedule"]'
    # whenNoProfileFits: deny: nothing is left unchanged for want of a class
    assert variable(policy, "unfitting") == "false"


def test_each_policy_value_is_chosen_by_the_governing_policy():
    policies = load_policies(EXAMPLE_POLICIES / "per-team.yaml")
    policy = compiled(policies)[0]
    assert variable(policy, "policyName") == ('variables.governing == 0 ? "research"\n: "teaching"')
    # equal for every policy: written once
    assert variable(policy, "memoryAnnotation") == '"lwgpu.io/gpu-memory"'


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ("{aliyun.com/gpu-mem: Gi}", {"aliyun.com/gpu-mem": "8"}),
        ("{nvidia.com/gpumem: Mi}", {"nvidia.com/gpumem": "8192"}),
        # 8192 MiB = 8589934592 bytes hold 8589934 units of 1000 bytes, not 8589935
        ("{example.com/vram: '1000'}", {"example.com/vram": "8589934"}),
        ("{example.com/vram: 3Gi}", {"example.com/vram": "2"}),
    ],
)
def test_the_largest_ask_a_class_holds_is_counted_in_each_resources_units(resources, expected):
    spec = (
        "metadata: {name: p}\nspec:\n  whenNoProfileFits: ignore\n"
        f"  memoryRequests: {{resources: {resources}}}\n  profiles: [{{name: a, memory: 8Gi}}]"
    )
    policy = policy_from_yaml(POLICY_HEAD + spec)
    assert units_held(policy, 8192) == expected
    compiled_policy = compiled(PolicySet((policy,)))[0]
    assert variable(compiled_policy, "classUnits") == maps([expected])
    assert "variables.ignoreUnfitting" in variable(compiled_policy, "unfitting")


DISCOVERING = (
    "metadata: {name: found}\nspec:\n  discoverProfiles: true\n"
    "  profiles: [{name: a, memory: 1Gi, nodeSelector: {gpu: a}}]"
)
FOUND = (Profile("GRID-P4-2Q", 2048, frozen_map({"aliyun.accelerator/nvidia_mem": "2048MiB"})),)


def test_discovered_classes_cannot_be_compiled_without_a_snapshot():
    with pytest.raises(Unexpressible, match=r"policy 'found' .*discoverProfiles: true"):
        final_state_check(policies_from(DISCOVERING))


def test_discovered_classes_compile_as_the_webhook_merges_them():
    """The snapshot's classes become literals beside the static ones, exactly as if the
    policy had listed them (`Policy.with_discovered`, what the webhook serves)."""
    policies = policies_from(DISCOVERING)
    merged = policies.with_discovered(FOUND)
    static = PolicySet(tuple(replace(p, discover_profiles=False) for p in merged.policies))

    check = final_state_check(policies, discovered=FOUND)
    assert check == final_state_check(static)
    assert variable(check[0], "classMemory") == '{"GRID-P4-2Q": "2048Mi", "a": "1024Mi"}'


def test_no_policy_is_refused():
    with pytest.raises(Unexpressible, match="no policy"):
        final_state_check(PolicySet(()))


@pytest.mark.parametrize(
    ("text", "literal"),
    [("plain", '"plain"'), ('say "hi"', r'"say \"hi\""'), ("a\\b", r'"a\\b"'), ("é", '"é"')],
)
def test_string_literals(text, literal):
    assert string(text) == literal


def test_a_field_is_read_only_when_present_and_not_null():
    assert dig("o", ("spec", "x"), "{}") == (
        "(has(o.spec) && o.spec != null && has(o.spec.x) && o.spec.x != null ? o.spec.x : {})"
    )
