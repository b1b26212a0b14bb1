"""The final-state check as Kubernetes objects: a ValidatingAdmissionPolicy and its binding.

`admissionregistration.k8s.io/v1` (Kubernetes 1.30+; the checks use two-variable
comprehensions, 1.32+). `failurePolicy: Fail`: an expression that cannot be evaluated
refuses the request, so every field is read guarded (`webhook.compile.cel.dig`) and the
scope is in match conditions, which keep every other request out of the evaluation.
The binding denies (`validationActions: [Deny]`) in every namespace the policy matches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webhook.policy import PolicySet, Profile

from . import checks, scope, values
from .cel import Unexpressible, used
from .variables import every_variable

NAME = "lwgpu-final-state"
API_VERSION = "admissionregistration.k8s.io/v1"
LABELS = {"app.kubernetes.io/part-of": "lwgpu"}


def final_state_check(
    policies: PolicySet, discovered: Iterable[Profile] | None = None
) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding for `policies`, in the order to apply.

    `discovered`: the classes found on the Nodes now (`webhook.scheduling.
    profiles_from_labels`), merged into each policy with `discoverProfiles: true` as the
    webhook merges them; compile again when they change. Raises `Unexpressible` naming the
    first feature of a policy the checks cannot read as the webhook does.
    """
    if not policies.policies:
        raise Unexpressible("no policy to compile")
    policies = values.with_classes(policies, discovered)
    validations = checks.validations()
    read = [v[key] for v in validations for key in ("expression", "messageExpression")]
    return admission_objects(
        "ValidatingAdmissionPolicy",
        NAME,
        policies,
        read,
        {"validations": validations},
        {"validationActions": ["Deny"]},
    )


def admission_objects(
    kind: str,
    name: str,
    policies: PolicySet,
    read: list[str],
    own: dict[str, Any],
    binding: dict[str, Any],
) -> list[dict[str, Any]]:
    """An admission policy of `kind` and its binding: the webhook's scope, `failurePolicy:
    Fail`, the variables the expressions `read` need, and the policy's `own` fields (its
    validations or mutations) and its binding's."""
    policy = {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": dict(LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": scope.namespace_selector(),
                "resourceRules": scope.resource_rules(),
            },
            "variables": used(every_variable(policies), read),
            "matchConditions": scope.match_conditions(policies),
            **own,
        },
    }
    bound = {
        "apiVersion": API_VERSION,
        "kind": f"{kind}Binding",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "spec": {"policyName": name, **binding},
    }
    return [policy, bound]
