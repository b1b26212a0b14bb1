"""Checks against the real nodes, offline: `--nodes FILE` of `policy check` (and `review`).

FILE is what `kubectl get nodes -o yaml` prints (a `List` of Nodes; single Node documents
work too). The findings are warnings for an admin before rollout: a class no node carries,
a lightweight-labelled node no class selects, `wholeGPUPods: avoidLightweight` where no
other GPU node exists, and (for review) a pod whose final placement matches no node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.api.names import COUNT_LABEL, GPU_RESOURCE, MEM_LABEL
from webhook.api.types import KubeObject
from webhook.api.workload import as_map
from webhook.policy import Policy, PolicySet
from webhook.scheduling import carries, looks_lightweight, pod_fits_node

from .manifests import InputError, Manifest, read_documents

Nodes = Mapping[str, Mapping[str, str]]  # node name -> labels


def read_nodes(path: str) -> dict[str, dict[str, str]]:
    """The labels of every Node in `path`; raises `InputError` when it cannot be read, or
    holds no Node: read as an empty fleet, a `kubectl get nodes` table or a Deployment would
    report every class unmatched."""
    nodes: dict[str, dict[str, str]] = {}
    documents = read_documents([path])
    for document in documents:
        body = as_map(document.body)
        if body.get("kind") == "Node":
            nodes[node_name(body) or document.where] = node_labels(body)
    if not nodes:
        raise InputError(
            f"{path}: no Node in it, only {_held(documents)}; write it with"
            f" `kubectl get nodes -o yaml > {path}`",
            path,
        )
    return nodes


def node_name(node: Mapping[str, Any]) -> str:
    """A Node's name ('' where it has none)."""
    return str(as_map(node.get("metadata")).get("name") or "")


def node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    """A Node's labels as the findings read them: a node whose capacity holds GPUs counts as
    a GPU node even where no label says so."""
    metadata = as_map(node.get("metadata"))
    labels = {k: v for k, v in as_map(metadata.get("labels")).items() if isinstance(v, str)}
    if GPU_RESOURCE in as_map(as_map(node.get("status")).get("capacity")):
        labels.setdefault(COUNT_LABEL, "?")
    return labels


def _held(documents: Sequence[Manifest]) -> str:
    """What the documents are, in a few words: `a Deployment and 2 Services`, or text."""
    kinds = Counter(
        str(document.body.get("kind") or "object without a kind")
        if isinstance(document.body, dict)
        else "text"
        for document in documents
    )
    if set(kinds) == {"text"}:
        return "text, not objects (`kubectl get nodes` prints a table, `-o name` names)"
    words = [
        f"{'an' if kind[0] in 'AEIOUaeiou' else 'a'} {kind}" if count == 1 else f"{count} {kind}s"
        for kind, count in kinds.items()
    ]
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _is_gpu_node(labels: Mapping[str, str]) -> bool:
    return COUNT_LABEL in labels or MEM_LABEL in labels


def policy_findings(policies: PolicySet, nodes: Nodes) -> list[str]:
    """What a policy set gets wrong about these nodes, one sentence each."""
    findings: list[str] = []
    for policy in policies.policies:
        findings += _policy_findings(policy, nodes)
    return findings


def _policy_findings(policy: Policy, nodes: Nodes) -> list[str]:
    where = f"policy {policy.name!r} ({policy.source})"
    findings = [
        f"{where}: class {p.name} ({p.selector_text}) matches no node"
        for p in policy.profiles
        if not any(carries(p, labels) for labels in nodes.values())
    ]
    theirs = policy.leave_alone.node_selector_keys
    for name, labels in sorted(nodes.items()):
        # The rule discovery uses too, with this policy's own leaveAlone keys.
        if looks_lightweight(labels, theirs) and not any(
            carries(p, labels) for p in policy.profiles
        ):
            findings.append(
                f"{where}: node {name} ({MEM_LABEL}={labels[MEM_LABEL]}, one GPU) looks "
                "lightweight, but no class selects it"
            )
    others = [
        n
        for n, labels in nodes.items()
        if _is_gpu_node(labels) and not any(carries(p, labels) for p in policy.profiles)
    ]
    if policy.whole_gpu_pods == "avoidLightweight" and not others:
        findings.append(
            f"{where}: wholeGPUPods: avoidLightweight, but no GPU node outside the lightweight "
            "classes exists: whole-GPU pods would stay Pending"
        )
    return findings


def unplaceable(spec: KubeObject, nodes: Nodes) -> bool:
    """True when no node admits the pod spec's nodeSelector and required node affinity."""
    return not any(pod_fits_node(spec, labels) for labels in nodes.values())
