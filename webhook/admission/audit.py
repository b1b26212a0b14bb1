"""The `auditAnnotations` of an answer: why the apiserver's audit log shows a GPU object
changed, refused or left alone.

kube-apiserver records each key of `AdmissionResponse.auditAnnotations` as
`<webhook name>/<key>` (`mutate.lwgpu.io/decision`) in the request's audit event, at
Metadata level (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/
dispatcher.go and validating/dispatcher.go, `callHook`: `attr.Attributes.AddAnnotation(h.Name
+ "/" + k, v)`). `AddAnnotationWithLevel` in staging/src/k8s.io/apiserver/pkg/admission/
attributes.go drops a key that, so prefixed, is not a qualified name (`checkKeyFormat`: a
name part of at most 63 characters of `[-A-Za-z0-9_.]`, alphanumeric at both ends), so the
keys are fixed words; it drops a second, different value for a key already set (a reinvoked
mutating webhook cannot overwrite its first answer); it bounds no value, so this module does.

The values say what was decided, not what the object holds: the outcome, the class and the
policy by name, and the GPU resources asked as `resource=amount` (never a container's name,
image or environment). A key is absent when it has no value (no class chosen, no governing
policy, nothing asked).
"""

from __future__ import annotations

from typing import Final

from webhook.api.names import GPU_RESOURCE
from webhook.api.text import shorten
from webhook.core.decision import Decision
from webhook.policy import Policy

# The keys, each a qualified name's name part once the apiserver prefixes the webhook's name.
DECISION: Final = "decision"
CLASS: Final = "class"
POLICY: Final = "policy"
ASKED: Final = "asked"
# Characters of one value. Every policy name (a DNS subdomain, at most 253) and class name (a
# label value, at most 63) fits whole; a pod asking GPU memory in many containers is cut with
# an ellipsis. Four values of at most 256 characters keep each audit event's share under
# about 1 KiB, however large the object (the apiserver bounds none of them).
VALUE_LIMIT: Final = 256


def annotations_of(decision: Decision, outcome: str, policy: Policy | None) -> dict[str, str]:
    """The audit annotations of the answer `outcome` to the request `decision` decided.

    `outcome` is what the endpoint answered (the validating endpoint denies an object still
    to be rewritten); `policy` the one that governs the object's namespace, if any.
    """
    found = {DECISION: outcome}
    if decision.profile is not None:
        found[CLASS] = shorten(decision.profile, VALUE_LIMIT)
    if policy is not None:
        found[POLICY] = shorten(policy.name, VALUE_LIMIT)
        asked = _asked(decision)
        if asked:
            found[ASKED] = asked
    return found


def _asked(decision: Decision) -> str:
    """`aliyun.com/gpu-mem=2, nvidia.com/gpu=1`: each GPU ask the decision read from the pod
    template, as written; empty when it read none (out of scope, or the asks were refused)."""
    text = ", ".join(a.source or f"{GPU_RESOURCE}={a.gpus}" for a in decision.asks or ())
    return shorten(text, VALUE_LIMIT)
