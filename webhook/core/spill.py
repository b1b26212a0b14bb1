"""Spill-over placement (`spec.placement: spillOver`): every class that fits, the smallest
preferred, so a full small class does not leave pods Pending beside idle larger nodes.

Instead of one class's nodeSelector the pod gets a required node affinity that admits the
nodes of every fitting class, and one preferred term per class weighted for the smallest.
The scheduler's rule (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`,
`NodeSelector.Match`): required terms are ORed and the expressions inside a term ANDed.
So "the pod's own terms AND one of the classes" is, when every class selects on one and the
same key, one `In` expression merged into every existing term; classes selecting on other
keys (or on several) are each a term of their own, and every existing term is combined with
each of them. A term that already holds all of one group's expressions is confined to
fitting classes and is kept as it is: a second review (reinvocation) adds nothing.

Preferred terms only score nodes (NodeAffinity's `Score`, summed weights); other scoring
plugins weigh in too, so the smallest class is favoured, not guaranteed.
"""

from __future__ import annotations

import copy
from typing import Any

from webhook.api.types import KubeObject
from webhook.policy import Profile
from webhook.scheduling import required_terms

from .edit import Editor

Expression = dict[str, Any]
_AFFINITY = ("affinity", "nodeAffinity")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def groups(classes: list[Profile]) -> list[list[Expression]]:
    """The classes as ORed groups of ANDed expressions: classes selecting on one same key
    share one `In` expression; a class selecting on several keys is a group of its own."""
    result: list[list[Expression]] = []
    by_key: dict[str, Expression] = {}
    for profile in classes:
        if len(profile.node_selector) != 1:
            result.append(_exact(profile))
            continue
        ((key, value),) = profile.node_selector.items()
        if key not in by_key:
            by_key[key] = {"key": key, "operator": "In", "values": []}
            result.append([by_key[key]])
        if value not in by_key[key]["values"]:
            by_key[key]["values"].append(value)
    return result


def _exact(profile: Profile) -> list[Expression]:
    return [
        {"key": k, "operator": "In", "values": [v]}
        for k, v in sorted(profile.node_selector.items())
    ]


def _merged(terms: list[Any], wanted: list[list[Expression]]) -> list[Any]:
    """The pod's required terms AND one of `wanted`, distributed over the ORed terms."""
    if not terms:
        return [{"matchExpressions": copy.deepcopy(group)} for group in wanted]
    merged: list[Any] = []
    for term in terms:
        present = term.get("matchExpressions") if isinstance(term, dict) else None
        have = present if isinstance(present, list) else []
        if any(all(e in have for e in group) for group in wanted):
            merged.append(term)  # already confined to fitting classes
            continue
        base = term if isinstance(term, dict) else {}
        for group in wanted:
            extra = [e for e in group if e not in have]
            merged.append({**base, "matchExpressions": copy.deepcopy([*have, *extra])})
    return merged


def preferences(classes: list[Profile]) -> list[Expression]:
    """One preferred term per class, weights 100 for the smallest down to 1."""
    count = len(classes)
    return [
        {
            "weight": max(1, 100 * (count - i) // count),
            "preference": {"matchExpressions": _exact(p)},
        }
        for i, p in enumerate(classes)
    ]


def spread(
    edit: Editor, path: tuple[str, ...], template_spec: KubeObject, classes: list[Profile]
) -> None:
    """Write the required and preferred node affinity of `classes` into the template."""
    affinity = (*path, "spec", *_AFFINITY)
    terms = required_terms(template_spec)
    merged = _merged(terms, groups(classes))
    if merged != terms:
        _ensure_node_affinity(edit, path)
        edit.ensure((*affinity, REQUIRED), dict)
        edit.set((*affinity, REQUIRED, "nodeSelectorTerms"), merged)
    node = edit.get(affinity)
    existing = node.get(PREFERRED) if isinstance(node, dict) else None
    missing = [
        p for p in preferences(classes) if not (isinstance(existing, list) and p in existing)
    ]
    if not missing:
        return
    _ensure_node_affinity(edit, path)
    edit.ensure((*affinity, PREFERRED), list)
    for preference in missing:
        edit.append((*affinity, PREFERRED), preference)


def _ensure_node_affinity(edit: Editor, path: tuple[str, ...]) -> None:
    for depth in range(1, len(_AFFINITY) + 1):
        edit.ensure((*path, "spec", *_AFFINITY[:depth]), dict)
