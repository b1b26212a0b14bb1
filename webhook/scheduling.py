"""Nodes and pods as the scheduler matches them: which classes nodes carry, and whether a pod
may land on a node.

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

from webhook.api.names import COUNT_LABEL, MEM_LABEL, MEM_VALUE, NAME_LABEL
from webhook.api.types import KubeObject
from webhook.api.workload import as_map
from webhook.policy import Profile, frozen_map

_INTEGER = re.compile(r"^[-+]?\d+$")


# ACK's shared-GPU (cGPU) node pools carry this label: their nodes are ACK's to share, never a
# lightweight class, whatever policy is loaded (discovery serves every policy at once).
SHARING_NODE_KEYS = ("ack.node.gpu.schedule",)


def looks_lightweight(
    labels: Mapping[str, str], sharing_keys: Iterable[str] = SHARING_NODE_KEYS
) -> bool:
    """A lightweight node by the cloud's labels: its GPU memory labelled, one GPU (a full GPU
    pool carries nvidia_count > 1; a node labelled by memory only counts as one), and no label
    key of another GPU-sharing system (`sharing_keys`: a policy's
    leaveAlone.nodeSelectorKeys)."""
    return (
        MEM_LABEL in labels
        and labels.get(COUNT_LABEL, "1") == "1"
        and not any(key in labels for key in sharing_keys)
    )


def profiles_from_labels(
    labels_by_node: Mapping[str, Mapping[str, str]],
    sharing_keys: Iterable[str] = SHARING_NODE_KEYS,
) -> tuple[Profile, ...]:
    """One Profile per distinct `nvidia_mem` value of the nodes that `looks_lightweight`,
    ascending memory: a pool of 4-GPU nodes or an ACK cGPU pool never becomes a class.

    The class is named after the nodes' `nvidia_name` when they all agree (and lists it in
    its node labels, so a pod pinning that name is understood), else after the memory label
    value ("7611MiB"); its nodeSelector is the exact `nvidia_mem` label value.
    Nodes whose `nvidia_mem` is not "<integer>MiB" are skipped.
    """
    names: dict[str, set[str]] = defaultdict(set)
    memory_mib: dict[str, int] = {}
    sharing_keys = tuple(sharing_keys)
    for labels in labels_by_node.values():
        if not looks_lightweight(labels, sharing_keys):
            continue
        mem = labels.get(MEM_LABEL, "")
        if match := MEM_VALUE.fullmatch(mem):
            memory_mib[mem] = int(match[1])
            names[mem].add(labels.get(NAME_LABEL) or mem)
    found = []
    for mem, seen in names.items():
        name = next(iter(seen)) if len(seen) == 1 else mem
        found.append(
            Profile(
                name=name,
                memory_mib=memory_mib[mem],
                node_selector=frozen_map({MEM_LABEL: mem}),
                node_labels=frozen_map({NAME_LABEL: name} if name != mem else {}),
            )
        )
    return tuple(sorted(found, key=lambda p: (p.memory_mib, p.name)))


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
    key, operator = expression.get("key"), expression.get("operator")
    raw = expression.get("values")
    values: list[Any] = raw if isinstance(raw, list) else []
    present = isinstance(key, str) and key in labels
    value = labels.get(key) if present and isinstance(key, str) else None
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        bound, have = str(values[0]), str(value)
        if not (_INTEGER.match(bound) and _INTEGER.match(have)):
            return False
        return int(have) > int(bound) if operator == "Gt" else int(have) < int(bound)
    return False


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
