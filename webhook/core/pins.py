"""The refusals of a pod whose own selector pins the class: naming what the user wrote.

A pod pins a class by any label the policy knows its nodes carry (`placement`): the
selector `aliyun.accelerator/nvidia_name: GRID-P4-2Q` pins the class whose nodeSelector is
`aliyun.accelerator/nvidia_mem: 2048MiB`. The message quotes the nodeSelector entry or the
required node affinity expressions as written, and the fix in the same label key.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.api.text import shorten
from webhook.api.types import KubeObject
from webhook.api.workload import as_map
from webhook.policy import Policy, Profile
from webhook.scheduling import required_terms

from .asks import Ask, Refusal
from .placement import term_constraints


def _expressions(spec: KubeObject, key: str) -> list[str]:
    """The required node affinity expressions on `key`, as written (`key In [a, b]`), once."""
    found: dict[str, None] = {}
    for term in required_terms(spec):
        expressions = term.get("matchExpressions") if isinstance(term, dict) else None
        for e in expressions if isinstance(expressions, list) else []:
            if not (isinstance(e, dict) and e.get("key") == key):
                continue
            values = e.get("values")
            listed = (
                " [" + ", ".join(shorten(v, 63) for v in values[:4]) + "]"
                if isinstance(values, list) and values
                else ""
            )
            found[f"{shorten(key, 63)} {shorten(e.get('operator'), 20)}{listed}"] = None
    return list(found)


def _written(spec: KubeObject, keys: Iterable[str]) -> tuple[str, str]:
    """(the field, what the pod wrote there) for the label keys it pins a class by."""
    selector = as_map(spec.get("nodeSelector"))
    parts, fields = [], set()
    for key in keys:
        if key in selector:
            fields.add("nodeSelector")
            parts.append(f"nodeSelector {shorten(key, 63)}={shorten(selector[key], 63)}")
        else:
            fields.add("affinity")
            parts.append("required node affinity " + " and ".join(_expressions(spec, key)))
    return "/".join(sorted(fields, reverse=True)), " and ".join(parts)


def _keys(spec: KubeObject, policy: Policy) -> list[str]:
    """The label keys by which the pod pins classes."""
    return sorted({key for way in term_constraints(spec, policy.profiles) or [] for key in way})


def unknown(spec: KubeObject, policy: Policy, prefix: str) -> Refusal:
    """The refusal of a pod pinning only classes the policy does not offer."""
    field, written = _written(spec, _keys(spec, policy))
    classes = ", ".join(f"{p.name}: {p.selector_text}" for p in policy.profiles[:8])
    return Refusal(
        f"{prefix}spec.{field}: {written} matches no lightweight GPU class of policy "
        f"{policy.name!r} ({classes}); remove it and the webhook will choose the class"
    )


def too_small(
    spec: KubeObject,
    policy: Policy,
    admitted: tuple[Profile, ...],
    instead: Profile,
    ask: Ask,
    memory: int,
    prefix: str,
) -> Refusal:
    """The refusal of a pod pinning classes smaller than its ask, where `instead` holds it."""
    keys = _keys(spec, policy)
    field, written = _written(spec, keys)
    largest = admitted[-1]
    pinned = (
        f"{largest.name} ({largest.memory_mib}Mi)"
        if len(admitted) == 1
        else f"{', '.join(p.name for p in admitted[:4])} (at most {largest.memory_mib}Mi)"
    )
    # The fix in the key the user pinned by, where the class's nodes carry it.
    labels = [f"{k}={instead.labels[k]}" for k in keys if k in instead.labels]
    how = ", ".join(labels) if len(labels) == len(keys) else instead.selector_text
    return Refusal(
        f"{prefix}spec.{field}: {written} pins {pinned}, but {ask.where} asks {ask.source} "
        f"({memory}Mi); remove the selector or pin {instead.name} ({how})"
    )
