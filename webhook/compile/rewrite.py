"""The webhook's static rewrite as Kubernetes objects: a MutatingAdmissionPolicy and its
binding, which rewrite in kube-apiserver what the webhook would rewrite, with no call out.

`admissionregistration.k8s.io/v1`, served by default since Kubernetes 1.36 (the
`MutatingAdmissionPolicy` feature gate is GA and on: `pkg/features/kube_features.go`;
v1.37.2 serves v1 with no flag). Same scope as the final-state check (`scope`), the asks read
as the webhook reads them (`asks`), the class chosen as it chooses (`placement`) and one JSON
patch that writes what its rewrite writes (`patch`). `reinvocationPolicy: IfNeeded`: another
admission plugin's change is rewritten again, and a rewritten object is left as it is.
`failurePolicy: Fail`: an expression that cannot be evaluated refuses the request rather
than let it through unrewritten.

What the webhook decides from outside the policy is refused by name (`Unexpressible`):
classes discovered from Nodes (`discoverProfiles`), which change while a compiled policy
stays, and `placement: spillOver`, whose node affinity and preference weights over every
fitting class the patch does not write. The webhook's warnings have no counterpart: an
admission policy cannot warn.
"""

from __future__ import annotations

from typing import Any

from webhook.policy import PolicySet

from . import patch
from .cel import Unexpressible
from .final_state import admission_objects

NAME = "lwgpu-rewrite"


def _refuse_unexpressible(policies: PolicySet) -> None:
    if not policies.policies:
        raise Unexpressible("no policy to compile")
    for policy in policies.policies:
        where = f"policy {policy.name!r} ({policy.source})"
        if policy.discover_profiles:
            raise Unexpressible(
                f"{where}: discoverProfiles: true; the rewrite in the apiserver is compiled "
                "ahead, while classes discovered from Nodes change as nodes come and go"
            )
        if policy.placement != "exact":
            raise Unexpressible(
                f"{where}: placement: {policy.placement}; the rewrite in the apiserver writes "
                "the chosen class's nodeSelector only (placement: exact)"
            )


def rewrite_policy(policies: PolicySet) -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy and its binding for `policies`, in the order to apply.

    Raises `Unexpressible` naming the first feature of a policy it cannot rewrite as the
    webhook does.
    """
    _refuse_unexpressible(policies)
    mutation = patch.mutation(policies)
    own = {
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": mutation}}],
    }
    return admission_objects("MutatingAdmissionPolicy", NAME, policies, [mutation], own, {})
