"""`mode: audit` in the compiled objects: neither the final-state check nor the rewrite in the
apiserver decides an object of a namespace whose governing policy only audits, as the webhook
admits it as it came (parity). Read without an apiserver here; what the apiserver does with
them is tests/cluster/test_audit_mode.py.
"""

from __future__ import annotations

import pytest

from tests.compile.test_final_state import policies_from
from tests.support.policies import default_policies
from webhook.compile import final_state_check, rewrite_policy
from webhook.compile.scope import enforced

BROAD = "metadata: {name: broad}\nspec:\n  profiles: [{name: a, memory: 1Gi}]"
TRIAL = (
    "metadata: {name: trial}\nspec:\n  namespaces: {include: [trial-*], exclude: [trial-x]}\n"
    "  profiles: [{name: b, memory: 2Gi}]\n  mode: audit"
)
EXACT = (
    "metadata: {name: exact}\nspec:\n  namespaces: {include: [trial-x]}\n"
    "  profiles: [{name: c, memory: 4Gi}]"
)


def conditions(objects: list[dict]) -> dict[str, str]:
    return {c["name"]: c["expression"] for c in objects[0]["spec"]["matchConditions"]}


def test_the_governing_policys_mode_decides_as_governing_does():
    """The most specific claim decides, as `PolicySet.for_namespace` (and `governing`): an
    audited glob under an enforced exact name, and over the enforced `*`."""
    chain = enforced(policies_from(BROAD, TRIAL, EXACT)).split("\n")
    assert chain == [
        'request.namespace == "trial-x" ? true',
        ': request.namespace.matches("^trial-.*$") && !(request.namespace == "trial-x") ? false',
        ": true ? true",
        ": false",
    ]


@pytest.mark.parametrize("compile_", [final_state_check, rewrite_policy])
def test_both_objects_leave_audited_namespaces_out(compile_):
    policies = policies_from(BROAD, TRIAL, EXACT)
    found = conditions(compile_(policies))
    assert found["enforced-namespace"] == enforced(policies)


@pytest.mark.parametrize("compile_", [final_state_check, rewrite_policy])
def test_without_an_audited_policy_the_objects_are_as_before(compile_):
    assert "enforced-namespace" not in conditions(compile_(default_policies()))
    assert "enforced-namespace" not in conditions(compile_(policies_from(BROAD, EXACT)))


def test_a_policy_that_only_audits_lets_nothing_be_refused_or_rewritten():
    chain = enforced(policies_from(TRIAL)).split("\n")
    assert [line.rsplit(" ", 1)[-1] for line in chain] == ["false", "false"]
