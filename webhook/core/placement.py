"""Which lightweight GPU classes a pod already allows, and which one to give it.

A pod "pins" a class when its `nodeSelector` or its *required* node affinity
constrains a label key that any profile selects on or lists in `nodeLabels`. Required
node affinity terms are ORed and the expressions inside a term ANDed (Kubernetes' rule),
so a key is constrained only when every term constrains it. A class is still a candidate
only when the policy knows its nodes carry an admitted value for *every* pinned key: the
webhook never adds a selector that contradicts one already there.

The selector the webhook wrote itself (the class named by `lwgpu.io/profile`, with its
exact values still in `nodeSelector`) is its own earlier choice, not the user's pin:
client-side `kubectl apply` keeps fields it did not write, so it is still there after the
user changes the memory ask, and the class is chosen again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webhook.api.names import PROFILE_ANNOTATION
from webhook.api.types import KubeObject
from webhook.api.workload import as_map
from webhook.policy import Profile
from webhook.scheduling import required_terms, requirement_met

Constraints = dict[str, frozenset[str]]


def _term_values(term: object, key: str, known: frozenset[str]) -> frozenset[str] | None:
    """Known values of `key` one node selector term admits; None when the term leaves it free."""
    expressions = term.get("matchExpressions") if isinstance(term, dict) else None
    admitted: frozenset[str] | None = None
    for expr in expressions if isinstance(expressions, list) else []:
        if not isinstance(expr, dict) or expr.get("key") != key:
            continue
        values = expr.get("values")
        values = [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
        admitted = (known if admitted is None else admitted) & _matching(
            expr.get("operator"), values, known
        )
    return admitted


def _matching(operator: object, values: list[str], known: frozenset[str]) -> frozenset[str]:
    """The known label values one node selector requirement admits (`requirement_met`)."""
    return frozenset(v for v in known if requirement_met(operator, values, v))


def constraints(spec: KubeObject, profiles: Iterable[Profile]) -> Constraints:
    """For each profile label key the pod constrains, the profiles' values it still admits.

    Only values some profile uses matter, so each set is a subset of those; an
    empty set means the pod pins only classes no profile offers.
    """
    selector = as_map(spec.get("nodeSelector"))
    terms = required_terms(spec)
    if not selector and not terms:
        return {}  # the usual pod pins nothing: skip gathering the profiles' labels
    known: dict[str, set[str]] = {}
    for profile in profiles:
        for key, value in profile.labels.items():
            known.setdefault(key, set()).add(value)
    result: Constraints = {}
    for key, values in known.items():
        universe = frozenset(values)
        admitted: frozenset[str] | None = None
        per_term = [_term_values(term, key, universe) for term in terms]
        bounded = [v for v in per_term if v is not None]
        if bounded and len(bounded) == len(per_term):
            admitted = frozenset().union(*bounded)
        if key in selector:
            wanted = selector[key]
            base = universe if admitted is None else admitted
            # A value that is not a string matches no label (and may not even be hashable).
            admitted = base & {wanted} if isinstance(wanted, str) else frozenset()
        if admitted is not None:
            result[key] = admitted
    return result


def admits(pinned: Constraints, profile: Profile) -> bool:
    """True when the class's nodes carry an admitted value of every key the pod pins."""
    labels = profile.labels
    return all(key in labels and labels[key] in values for key, values in pinned.items())


def own_choice(
    annotations: KubeObject, spec: KubeObject, profiles: Iterable[Profile]
) -> Profile | None:
    """The class the webhook chose before, when its selector is still in place as written."""
    name = annotations.get(PROFILE_ANNOTATION)
    selector = as_map(spec.get("nodeSelector"))
    for profile in profiles:
        if profile.name == name and all(
            selector.get(key) == value for key, value in profile.node_selector.items()
        ):
            return profile
    return None


def without_selector(spec: KubeObject, profile: Profile) -> KubeObject:
    """`spec` (shallow-copied) with `profile`'s selector entries taken out of `nodeSelector`."""
    selector = as_map(spec.get("nodeSelector"))
    rest = {k: v for k, v in selector.items() if k not in profile.node_selector}
    return {**spec, "nodeSelector": rest}


def fitting(profiles: Iterable[Profile], memory_mib: int) -> list[Profile]:
    """The profiles whose GPU holds `memory_mib`, in fit order: the first is `best_fit`'s."""
    return [p for p in profiles if p.memory_mib >= memory_mib]


def term_constraints(spec: KubeObject, profiles: tuple[Profile, ...]) -> list[Constraints] | None:
    """What each way onto a node pins; None when one way pins no class key.

    Each required term (ORed) is read with the nodeSelector as a pod of its own, so two terms
    that each pin a class on another key pin those two classes, not every mix of their values.
    """
    terms = required_terms(spec)
    ways = [{**spec, "affinity": _only(term)} for term in terms] if len(terms) > 1 else [spec]
    pins = [constraints(way, profiles) for way in ways]
    return None if not all(pins) else pins


def pinned_classes(spec: KubeObject, profiles: tuple[Profile, ...]) -> list[Profile] | None:
    """The classes a pod pins, term by term; None when one way onto a node pins none.

    The pod may land on the union of what its terms admit (a spill-over affinity over classes
    selecting on different keys is such a pod).
    """
    pins = term_constraints(spec, profiles)
    if pins is None:
        return None
    return [p for p in profiles if any(admits(pinned, p) for pinned in pins)]


def _only(term: Any) -> KubeObject:
    required = {"nodeSelectorTerms": [term]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def best_fit(profiles: Iterable[Profile], memory_mib: int) -> Profile | None:
    """The smallest profile whose GPU holds `memory_mib`."""
    fits = fitting(profiles, memory_mib)
    return min(fits, key=lambda p: p.memory_mib) if fits else None
