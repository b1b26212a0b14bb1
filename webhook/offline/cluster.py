"""Checks against the real nodes, offline: `--nodes FILE` of `policy check` (and `review`).

FILE is what `kubectl get nodes -o yaml` prints (a `List` of Nodes; single Node documents
work too), read with labels, taints and allocatable (`webhook.fitting.Node`). The findings
are warnings for an admin before rollout: a class no node carries, a class whose every node
has a taint the class's tolerations leave untolerated, or offers no `nvidia.com/gpu`, a node
of a class whose labels contradict its `nodeLabels`, a node of a class that GPU Feature
Discovery says is time-sliced or MPS-shared, a lightweight-labelled node no class selects
(and, for a discovering policy, a shared one discovery skips), `wholeGPUPods:
avoidLightweight` where no other GPU node exists, and (for review) a pod that no node takes,
with the scheduler's reasons (`unschedulable`). Nodes are read by the cloud's labels or GPU
Feature Discovery's, alike (`webhook.scheduling`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from webhook.api.names import (
    COUNT_LABEL,
    GFD_COUNT_LABEL,
    GFD_REPLICAS_LABEL,
    GFD_SHARING_LABEL,
    GPU_RESOURCE,
)
from webhook.api.types import KubeObject
from webhook.api.workload import as_map
from webhook.fitting import Node, missing, read_node, untolerated
from webhook.policy import Policy, PolicySet, Profile, frozen_map
from webhook.scheduling import (
    MEMORY_LABELS,
    carries,
    looks_lightweight,
    pod_fits_node,
    profiles_from_labels,
    shared_by,
)

from .manifests import InputError, Manifest, read_documents

Nodes = Mapping[str, Node]  # node name -> what the scheduler's filters read of it
# kube-scheduler's own words for a node NodeAffinity filters out (nodeaffinity/node_affinity.go
# `ErrReasonPod`).
AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def read_nodes(path: str) -> dict[str, Node]:
    """Every Node in `path` (`fleet_node`); raises `InputError` when it cannot be read, or
    holds no Node: read as an empty fleet, a `kubectl get nodes` table or a Deployment would
    report every class unmatched."""
    nodes: dict[str, Node] = {}
    documents = read_documents([path])
    for document in documents:
        body = as_map(document.body)
        if body.get("kind") == "Node":
            nodes[node_name(body) or document.where] = fleet_node(body)
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


def fleet_node(node: Mapping[str, Any]) -> Node:
    """A Node object as the checks read it: its labels as `node_labels` reads them."""
    return replace(read_node(node), labels=frozen_map(node_labels(node)))


def node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    """A Node's labels as the findings read them: a node whose capacity holds GPUs counts as
    a GPU node (of unknown count) even where no label says so."""
    metadata = as_map(node.get("metadata"))
    labels = {k: v for k, v in as_map(metadata.get("labels")).items() if isinstance(v, str)}
    if GPU_RESOURCE in as_map(as_map(node.get("status")).get("capacity")) and not _is_gpu_node(
        labels
    ):
        labels[COUNT_LABEL] = "?"
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
    return any(key in labels for key in (COUNT_LABEL, GFD_COUNT_LABEL, *MEMORY_LABELS))


def _unshared(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels without GPU Feature Discovery's word on sharing the GPU."""
    return {k: v for k, v in labels.items() if k not in (GFD_SHARING_LABEL, GFD_REPLICAS_LABEL)}


def _shared(labels: Mapping[str, str]) -> str:
    """Why a node GPU Feature Discovery labels shared is not lightweight, in a few words."""
    return (
        f"is a shared GPU ({shared_by(labels)}: each pod asking {GPU_RESOURCE}: 1 gets "
        "a replica of it and shares its memory), not lightweight"
    )


def _memory_text(labels: Mapping[str, str]) -> str:
    """The memory label the node is read by, as written: `nvidia.com/gpu.memory=4096`."""
    key = next(k for k in MEMORY_LABELS if k in labels)
    return f"{key}={labels[key]}"


def with_discovered(policies: PolicySet, nodes: Nodes) -> PolicySet:
    """`policies` with the classes discovery makes of `nodes`, in the policies that discover
    (`discoverProfiles: true`), as the webhook's inventory makes them of the cluster's."""
    return policies.with_discovered(profiles_from_labels({n: v.labels for n, v in nodes.items()}))


def policy_findings(policies: PolicySet, nodes: Nodes) -> list[str]:
    """What a policy set gets wrong about these nodes, one sentence each."""
    findings: list[str] = []
    for policy in policies.policies:
        findings += _policy_findings(policy, nodes)
    return findings


def _policy_findings(policy: Policy, nodes: Nodes) -> list[str]:
    where = f"policy {policy.name!r} ({policy.source})"
    findings: list[str] = []
    for profile in policy.profiles:
        own = {n: node for n, node in sorted(nodes.items()) if carries(profile, node.labels)}
        if not own:
            findings.append(
                f"{where}: class {profile.name} ({profile.selector_text}) matches no node"
            )
            continue
        findings += [f"{where}: {finding}" for finding in _class_findings(profile, own)]
    theirs = policy.leave_alone.node_selector_keys
    for name, node in sorted(nodes.items()):
        labels = node.labels
        # The rule discovery uses too, with this policy's own leaveAlone keys.
        if any(carries(p, labels) for p in policy.profiles):
            continue
        if looks_lightweight(labels, theirs):
            findings.append(
                f"{where}: node {name} ({_memory_text(labels)}, one GPU) looks "
                "lightweight, but no class selects it"
            )
        elif policy.discover_profiles and looks_lightweight(_unshared(labels), theirs):
            findings.append(
                f"{where}: node {name} ({_memory_text(labels)}, one GPU) {_shared(labels)}, "
                "so discovery makes no class of it"
            )
    others = [
        n
        for n, node in nodes.items()
        if _is_gpu_node(node.labels) and not any(carries(p, node.labels) for p in policy.profiles)
    ]
    if policy.whole_gpu_pods == "avoidLightweight" and not others:
        findings.append(
            f"{where}: wholeGPUPods: avoidLightweight, but no GPU node outside the lightweight "
            "classes exists: whole-GPU pods would stay Pending"
        )
    return findings


def _class_findings(profile: Profile, own: Mapping[str, Node]) -> list[str]:
    """What the class's own nodes (`own`: those carrying its nodeSelector) say against it."""
    found = []
    blocked = {name: untolerated(profile.tolerations, node) for name, node in own.items()}
    if all(blocked.values()):
        taint = next(iter(blocked.values()))[0]
        toleration = (
            f"{{key: {taint.key}, operator: Equal, value: {taint.value}, effect: {taint.effect}}}"
            if taint.value
            else f"{{key: {taint.key}, operator: Exists, effect: {taint.effect}}}"
        )
        found.append(
            f"class {profile.name}: every node of it has a taint its tolerations do not "
            f"tolerate ({_listed(blocked)}): the pods it rewrites stay Pending unless they "
            f"tolerate it themselves; add to the class: tolerations: [{toleration}]"
        )
    for name, node in own.items():
        for key, value in sorted(profile.node_labels.items()):
            if node.labels.get(key) != value:
                have = node.labels.get(key)
                found.append(
                    f"class {profile.name}: node {name} carries its nodeSelector but "
                    f"{f'{key}={have}' if have is not None else f'no label {key}'}, against "
                    f"the class's nodeLabels {key}={value}: a pod pinning the class by "
                    f"{key}={value} cannot land there"
                )
    shared = {name: node for name, node in own.items() if shared_by(node.labels)}
    if shared:
        first, node = next(iter(shared.items()))
        more = f" and {len(shared) - 1} more" if len(shared) > 1 else ""
        found.append(
            f"class {profile.name}: node {first}{more} {_shared(node.labels)}: the class's "
            f"pods get a slice of what its memory promises; select only unshared nodes "
            f"(add to its nodeSelector {GFD_SHARING_LABEL}: none)"
        )
    known = [node for node in own.values() if node.allocatable is not None]
    if known and not any((node.allocatable or {}).get(GPU_RESOURCE, 0) > 0 for node in known):
        found.append(
            f"class {profile.name}: none of its nodes offers {GPU_RESOURCE} in allocatable "
            f"({', '.join(n for n, node in own.items() if node.allocatable is not None)}): "
            f"the pods it rewrites to {GPU_RESOURCE}: 1 would stay Pending; is the NVIDIA "
            "device plugin running there?"
        )
    return found


def _listed(blocked: Mapping[str, Sequence[object]]) -> str:
    """`node-a: vgpu=t4:NoSchedule; node-b: ...`, the first three nodes."""
    shown = [f"{n}: {', '.join(map(str, taints))}" for n, taints in list(blocked.items())[:3]]
    more = f"; and {len(blocked) - 3} more" if len(blocked) > 3 else ""
    return "; ".join(shown) + more


def node_reasons(spec: KubeObject, node: Node) -> list[str]:
    """Why the node does not take the pod, in kube-scheduler's words; [] when it does.

    The filters run in the scheduler's order (pkg/scheduler/apis/config/v1/default_plugins.go)
    and the first that fails gives the reasons (framework/runtime/framework.go
    `RunFilterPlugins`): TaintToleration, NodeAffinity, then NodeResourcesFit.
    """
    tolerations = spec.get("tolerations")
    taints = untolerated(tolerations if isinstance(tolerations, list) else [], node)
    if taints:
        return [f"node(s) had untolerated taint {taints[0]}"]
    if not pod_fits_node(spec, node.labels):
        return [AFFINITY]
    return [f"Insufficient {name}" for name in missing(spec, node)]


def unschedulable(spec: KubeObject, nodes: Nodes) -> str | None:
    """None when some node takes the pod spec (labels, taints, extended resources); else why
    not, as kube-scheduler's `FitError` counts it: `0/3 nodes are available: 1 node(s) had
    untolerated taint vgpu=t4:NoSchedule, 2 node(s) didn't match ...`."""
    reasons = Counter[str]()
    for node in nodes.values():
        found = node_reasons(spec, node)
        if not found:
            return None
        reasons.update(found)
    counted = ", ".join(sorted(f"{n} {reason}" for reason, n in reasons.items()))
    return f"0/{len(nodes)} nodes are available: {counted}"
