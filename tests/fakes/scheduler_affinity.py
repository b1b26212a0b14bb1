"""A test double of the scheduler's node affinity filter, written from Kubernetes' source.

`k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`:
`GetRequiredNodeAffinity(pod).Match(node)` is true when the node carries every
`spec.nodeSelector` entry (`labels.SelectorFromSet`) and, if the pod has a required node
affinity, at least one of its `nodeSelectorTerms` matches (`NodeSelector.Match`: terms are
ORed; a term with no requirements matches nothing). Each `matchExpressions` requirement is
a `labels.Requirement` (`nodeSelectorRequirementsAsSelector`): `In` needs the label with one
of the values, `NotIn` accepts a missing label, `Exists`/`DoesNotExist` test presence, and
`Gt`/`Lt` parse both the single value and the label as integers (`strconv.ParseInt`) and
fail when either does not parse. `matchFields` (`metadata.name`) are matched against the
node name. Written apart from `webhook.core.nodes`, which it checks.
"""

from __future__ import annotations

from typing import Any

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _int(text: Any) -> int | None:
    try:
        return int(str(text), 10)
    except ValueError:
        return None


def _requirement(labels: dict[str, str], requirement: dict[str, Any]) -> bool:
    key, op, values = requirement["key"], requirement["operator"], requirement.get("values", [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        have, bound = _int(labels.get(key)), _int(values[0]) if len(values) == 1 else None
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    raise ValueError(f"the apiserver rejects operator {op!r}")  # validation would have refused


def _term(name: str, labels: dict[str, str], term: dict[str, Any]) -> bool:
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return all(_requirement(labels, e) for e in expressions) and all(
        _requirement({"metadata.name": name}, f) for f in fields
    )


def schedulable(spec: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    """Whether the node affinity filter lets a pod with this spec onto the node."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    if required is None:
        return True
    return any(_term(name, labels, term) for term in required.get("nodeSelectorTerms") or [])
