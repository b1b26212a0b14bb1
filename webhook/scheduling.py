"""Nodes and pods as the scheduler matches them: which classes nodes carry (by the cloud's
`aliyun.accelerator/*` labels or GPU Feature Discovery's `nvidia.com/gpu.*`), and whether a
pod may land on a node.

Pure functions over node labels and pod specs, shared by the decision (`webhook.core` reads
a pod's required terms), discovery (`webhook.kube.inventory`) and the offline cluster checks
(`--nodes FILE`). Matching follows the scheduler's node affinity
(`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`: `NodeSelector.Match`,
`nodeSelectorRequirementsAsSelector`): every nodeSelector entry must equal the node's label;
of the required terms (ORed) one must match, a term matching when all its expressions do
(an empty term matches no node); `In`/`Exists` need the label, `NotIn`/`DoesNotExist`
accept its absence, `Gt`/`Lt` compare integers and fail on anything else.

Imports: `webhook.policy`, `webhook.api` and the standard library. No I/O, no module state,
never `webhook.core` or anything above it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.api.names import (
    COUNT_LABEL,
    GFD_COUNT_LABEL,
    GFD_MEMORY_LABEL,
    GFD_MEMORY_VALUE,
    GFD_PRODUCT_LABEL,
    GFD_REPLICAS_LABEL,
    GFD_SHARING_LABEL,
    MEM_LABEL,
    MEM_VALUE,
    NAME_LABEL,
)
from webhook.api.types import KubeObject
from webhook.api.workload import as_map
from webhook.policy import Profile, frozen_map

_INTEGER = re.compile(r"[-+]?[0-9]+")


# ACK's shared-GPU (cGPU) node pools carry this label: their nodes are ACK's to share, never a
# lightweight class, whatever policy is loaded (discovery serves every policy at once).
SHARING_NODE_KEYS = ("ack.node.gpu.schedule",)
# The labels that say a node's GPU memory, the cloud's before GPU Feature Discovery's: a node
# carrying both is read (and selected) by the first.
MEMORY_LABELS = (MEM_LABEL, GFD_MEMORY_LABEL)
# The labels that name a node's GPU, in the same order.
NAME_LABELS = (NAME_LABEL, GFD_PRODUCT_LABEL)
# Every label `profiles_from_labels` reads besides its `sharing_keys` (`memory_mib`,
# `shared_by`, `looks_lightweight`, the agreed names): the node inventory holds only these of
# each Node (`class_labels`); tests/scheduling/test_class_labels.py records what the
# functions read, so a label read here and missing there fails it.
CLASS_LABELS = (
    *MEMORY_LABELS,
    *NAME_LABELS,
    COUNT_LABEL,
    GFD_COUNT_LABEL,
    GFD_SHARING_LABEL,
    GFD_REPLICAS_LABEL,
)


def memory_mib(labels: Mapping[str, str]) -> int | None:
    """The node's GPU memory in MiB: `nvidia_mem` ("7611MiB"), else GFD's `gpu.memory`
    ("7611"); None where neither is written so."""
    if match := MEM_VALUE.fullmatch(labels.get(MEM_LABEL, "")):
        return int(match[1])
    gfd = labels.get(GFD_MEMORY_LABEL, "")
    return int(gfd) if GFD_MEMORY_VALUE.fullmatch(gfd) else None


def shared_by(labels: Mapping[str, str]) -> str | None:
    """The label by which GPU Feature Discovery says the node's GPU is time-sliced or
    MPS-shared (`key=value`), None where it is not: every pod asking `nvidia.com/gpu: 1`
    there gets one of several replicas of one GPU, and its memory is not the pod's alone."""
    strategy = labels.get(GFD_SHARING_LABEL, "none")
    if strategy not in ("none", ""):
        return f"{GFD_SHARING_LABEL}={strategy}"
    replicas = labels.get(GFD_REPLICAS_LABEL, "")
    if replicas.isdigit() and int(replicas) > 1:
        return f"{GFD_REPLICAS_LABEL}={replicas}"
    return None


def looks_lightweight(
    labels: Mapping[str, str], sharing_keys: Iterable[str] = SHARING_NODE_KEYS
) -> bool:
    """A lightweight node by its labels, the cloud's or GPU Feature Discovery's: its GPU
    memory labelled, one GPU (a full GPU pool carries nvidia_count or gpu.count > 1; a node
    labelled by memory only counts as one), not time-sliced or MPS-shared (`shared_by`), and
    no label key of another GPU-sharing system (`sharing_keys`: a policy's
    leaveAlone.nodeSelectorKeys)."""
    return (
        any(key in labels for key in MEMORY_LABELS)
        and all(labels.get(key, "1") == "1" for key in (COUNT_LABEL, GFD_COUNT_LABEL))
        and shared_by(labels) is None
        and not any(key in labels for key in sharing_keys)
    )


def class_labels(
    labels: Mapping[str, str], sharing_keys: Iterable[str] = SHARING_NODE_KEYS
) -> tuple[tuple[str, str], ...]:
    """The (key, value) pairs of `labels` that `profiles_from_labels` reads, in key order:
    nodes with equal pairs are alike to it, whatever else they carry."""
    return tuple(sorted((k, labels[k]) for k in {*CLASS_LABELS, *sharing_keys} if k in labels))


def profiles_from_labels(
    labels_by_node: Mapping[str, Mapping[str, str]],
    sharing_keys: Iterable[str] = SHARING_NODE_KEYS,
) -> tuple[Profile, ...]:
    """One Profile per GPU memory (`memory_mib`) of the nodes that `looks_lightweight`,
    ascending memory: a pool of 4-GPU nodes, an ACK cGPU pool or a time-sliced pool never
    becomes a class, and a node labelled by both the cloud and GFD is one node of one class.

    Its nodeSelector is the first of `MEMORY_LABELS` every node of that memory carries with
    one value (nodes that share none are split by the label each carries first). It is named
    after the first of `NAME_LABELS` its nodes agree on, else after the memory ("7611MiB"),
    and lists as node labels every GPU label its nodes agree on, so that a pod pinning any of
    them is understood.
    """
    by_memory: dict[int, list[Mapping[str, str]]] = defaultdict(list)
    sharing_keys = tuple(sharing_keys)
    for labels in labels_by_node.values():
        mib = memory_mib(labels)
        if mib is not None and looks_lightweight(labels, sharing_keys):
            by_memory[mib].append(labels)
    found: list[Profile] = []
    for mib, nodes in sorted(by_memory.items()):
        for key, value, own in _selected(nodes):
            name = next((v for k in NAME_LABELS if (v := _agreed(own, k))), f"{mib}MiB")
            if any(p.name == name for p in found):  # split nodes of one name: keep names apart
                name = f"{name}-{value}"
            agreed = {k: v for k in (*NAME_LABELS, *MEMORY_LABELS) if (v := _agreed(own, k))}
            agreed.pop(key)
            found.append(Profile(name, mib, frozen_map({key: value}), node_labels=agreed))
    return tuple(sorted(found, key=lambda p: (p.memory_mib, p.name)))


def _agreed(nodes: Iterable[Mapping[str, str]], key: str) -> str | None:
    """The value of `key` every one of the nodes carries, None where one lacks it or differs."""
    values = {labels.get(key) for labels in nodes}
    value = values.pop() if len(values) == 1 else None
    return value or None


def _selected(
    nodes: list[Mapping[str, str]],
) -> list[tuple[str, str, list[Mapping[str, str]]]]:
    """(label key, value, the nodes it selects) for nodes of one GPU memory: one selector
    where a memory label says it on them all alike, else one per memory label the nodes
    carry first."""
    mib = memory_mib(nodes[0])
    for key in MEMORY_LABELS:
        value = _agreed(nodes, key)
        if value is not None and memory_mib({key: value}) == mib:
            return [(key, value, nodes)]
    split: dict[tuple[str, str], list[Mapping[str, str]]] = defaultdict(list)
    for labels in nodes:
        key = next(k for k in MEMORY_LABELS if memory_mib({k: labels.get(k, "")}) is not None)
        split[key, labels[key]].append(labels)
    # In label order, the shortest spelling first ("2048MiB" before "02048MiB"): the first
    # keeps the plain name, whatever order the nodes were listed in.
    order = sorted(split, key=lambda kv: (MEMORY_LABELS.index(kv[0]), len(kv[1]), kv[1]))
    return [(key, value, split[key, value]) for key, value in order]


def required_terms(spec: KubeObject) -> list[Any]:
    """The pod's required node affinity terms (ORed), as written; [] when it has none."""
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node, dict)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    return terms if isinstance(terms, list) else []


def _requirement(labels: Mapping[str, str], expression: Any) -> bool:
    if not isinstance(expression, dict):
        return False
    key, raw = expression.get("key"), expression.get("values")
    value = labels.get(key) if isinstance(key, str) else None
    return requirement_met(expression.get("operator"), raw if isinstance(raw, list) else [], value)


def requirement_met(operator: object, values: list[Any], value: str | None) -> bool:
    """Whether a node whose label holds `value` (None: it has no such label) meets one node
    selector requirement, as `labels.Requirement.Matches` answers
    (k8s.io/apimachinery/pkg/labels/selector.go): `Gt` and `Lt` read both sides with
    `strconv.ParseInt(s, 10, 64)` and fail where either is not such an integer."""
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        bound, have = _int64(values[0]), _int64(value)
        if bound is None or have is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _int64(text: object) -> int | None:
    """`text` as Go's `strconv.ParseInt(text, 10, 64)` reads it: an optional sign and ASCII
    digits, within 64 bits; None where it fails."""
    if not isinstance(text, str) or not _INTEGER.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def requires_label(expression: Any) -> bool:
    """True when no node without the requirement's label key satisfies it: `In`, `Exists`,
    `Gt` and `Lt` (`labels.Requirement.Matches` answers false where the node lacks the key),
    not `NotIn` and `DoesNotExist`, which such a node satisfies. A requirement no node
    satisfies (an operator the scheduler cannot parse) requires it too, vacuously."""
    return not _requirement({}, expression)


def required_keys(spec: KubeObject) -> set[str]:
    """The label keys of every node the pod may be placed on: each nodeSelector key (an
    equality), and each key that every required node selector term requires
    (`requires_label`). Terms are ORed (`RequiredNodeAffinity.Match`: the nodeSelector, then
    `NodeSelector.Match` over the terms), so a key one term leaves free is not required. An
    empty term places no pod (`isEmptyNodeSelectorTerm`) but is read as leaving every key
    free: the side on which lwgpu decides the pod rather than leave it alone."""
    keys = set(as_map(spec.get("nodeSelector")))
    per_term = []
    for term in required_terms(spec):
        expressions = term.get("matchExpressions") if isinstance(term, dict) else None
        per_term.append(
            {
                e["key"]
                for e in (expressions if isinstance(expressions, list) else [])
                if isinstance(e, dict) and isinstance(e.get("key"), str) and requires_label(e)
            }
        )
    return keys | set.intersection(*per_term) if per_term else keys


def _term(labels: Mapping[str, str], term: Any) -> bool:
    expressions = term.get("matchExpressions") if isinstance(term, dict) else None
    if not isinstance(expressions, list) or not expressions:
        return False  # matchFields (by node name) are not read here; an empty term matches none
    return all(_requirement(labels, e) for e in expressions)


def pod_fits_node(spec: KubeObject, labels: Mapping[str, str]) -> bool:
    """True when the pod spec's nodeSelector and required node affinity admit these labels."""
    selector = as_map(spec.get("nodeSelector"))
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = as_map(as_map(spec.get("affinity")).get("nodeAffinity"))
    if "requiredDuringSchedulingIgnoredDuringExecution" not in affinity:
        return True
    return any(_term(labels, term) for term in required_terms(spec))


def carries(profile: Profile, labels: Mapping[str, str]) -> bool:
    """True when a node with these labels is one of the class's nodes."""
    return all(labels.get(k) == v for k, v in profile.node_selector.items())
