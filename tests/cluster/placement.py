"""Where kube-scheduler will put the pods lwgpu admitted, said before it does, and where it did,
read from the cluster: the oracle the cluster tests hold the real scheduler to.

A pod is bound (`spec.nodeName`) or stays Pending with the scheduler's reason, the message of
its `PodScheduled=False` condition, which `FitError.Error` (pkg/scheduler/framework/types.go)
writes as "0/N nodes are available: " and then either one PreFilter message (a missing or
unbound PersistentVolumeClaim: volumebinding/volume_binding.go `PreFilter`) or, per node, the
reasons of the first Filter plugin that rejected it, counted and sorted as strings
("2 Insufficient nvidia.com/gpu, 11 node(s) didn't match Pod's node affinity/selector").
Filters run in the order of pkg/scheduler/apis/config/v1/default_plugins.go and stop at the
first that fails (framework/runtime/framework.go `RunFilterPlugins`); on this fleet (no taints,
no host ports in use) two decide: NodeAffinity (nodeaffinity/node_affinity.go, `ErrReasonPod`),
read here with lwgpu's own `pod_fits_node`, the rule `review --nodes` applies, so the scheduler
checks lwgpu's reading of selectors; then NodeResourcesFit (noderesources/fit.go
`fitsRequest`: "Too many pods", then "Insufficient R" for each requested R beyond what is left).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.api.quantity import parse
from webhook.api.workload import dig, group_of, template_path
from webhook.scheduling import pod_fits_node

SCHEDULER = "default-scheduler"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
# fitsRequest checks these three by name, every other requested resource as a scalar one.
NAMED = ("cpu", "memory", "ephemeral-storage")
TERMINAL = ("Succeeded", "Failed")


def api(plane, path: str) -> dict | None:
    """One GET of the apiserver as its admin: the JSON body, or None when it is not found."""
    status, body = plane.get(path)
    if status == 404:
        return None
    assert status == 200, f"GET {path}: {status} {body[:300]!r}"
    return json.loads(body)


def pod_spec(obj: Mapping[str, Any]) -> dict | None:
    """The pod spec of a Pod or of a workload's pod template, None for other kinds."""
    path = template_path(group_of(obj.get("apiVersion")), obj.get("kind"))
    spec = dig(obj, (*path, "spec")) if path is not None else None
    return spec if isinstance(spec, dict) else None


def _requests(container: Mapping[str, Any]) -> Counter:
    # A limit without a request is also the request: pkg/apis/core/v1/defaults.go
    # SetDefaults_Pod copies it into every Pod, including those controllers make from templates.
    resources = container.get("resources") or {}
    asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return Counter({name: parse(value) for name, value in asked.items()})


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the scheduler charges a pod: k8s.io/component-helpers/resource/helpers.go
    `PodRequests` (`AggregateContainerRequests`): app containers and sidecars together, or an
    init container beside the sidecars started before it, whichever is larger."""
    total: Counter = Counter()
    for container in spec.get("containers") or []:
        total.update(_requests(container))
    sidecars: Counter = Counter()
    init: Counter = Counter()
    for container in spec.get("initContainers") or []:
        own = _requests(container)
        if container.get("restartPolicy") == "Always":
            total.update(own)
            sidecars.update(own)
            step = Counter(sidecars)
        else:
            step = Counter(own)
            step.update(sidecars)
        for name, value in step.items():
            init[name] = max(init[name], value)
    return {name: max(total[name], init[name]) for name in total.keys() | init.keys()}


@dataclass(frozen=True)
class Node:
    """A Node as NodeResourcesFit reads it: its labels and what it can allocate."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, Decimal]


@dataclass
class Fleet:
    """The cluster's nodes and what the pods bound to them already take."""

    nodes: list[Node]
    used: dict[str, Counter] = field(default_factory=dict)
    pods: Counter = field(default_factory=Counter)

    @classmethod
    def now(cls, plane) -> Fleet:
        """The nodes, and the requests of every non-terminal pod bound to one (all namespaces)."""
        nodes = [
            Node(
                n["metadata"]["name"],
                n["metadata"].get("labels") or {},
                {k: parse(v) for k, v in n["status"]["allocatable"].items()},
            )
            for n in api(plane, "/api/v1/nodes")["items"]
        ]
        fleet = cls(nodes, {n.name: Counter() for n in nodes})
        for pod in api(plane, "/api/v1/pods")["items"]:
            node = pod["spec"].get("nodeName")
            if node in fleet.used and pod.get("status", {}).get("phase") not in TERMINAL:
                fleet.used[node].update(pod_requests(pod["spec"]))
                fleet.pods[node] += 1
        return fleet

    def labels(self, name: str) -> Mapping[str, str]:
        """The labels of one node."""
        return next(n.labels for n in self.nodes if n.name == name)

    def reasons(self, spec: Mapping[str, Any], asked: Mapping[str, Decimal], node: Node):
        """Why this node cannot take the pod now (the first failing filter's reasons), or []."""
        if not pod_fits_node(spec, node.labels):
            return [AFFINITY]
        free = {k: v - self.used[node.name][k] for k, v in node.allocatable.items()}
        found = ["Too many pods"] if self.pods[node.name] + 1 > node.allocatable["pods"] else []
        scalars = sorted(k for k in asked if k not in NAMED)
        for name in (*NAMED, *scalars):
            if asked.get(name, 0) > 0 and asked[name] > free.get(name, 0):
                found.append(f"Insufficient {name}")
        return found

    def schedule(self, spec: Mapping[str, Any], claims: str | None = None) -> tuple[str, set[str]]:
        """The outcome for one more pod with this spec, and the nodes it may be bound to.

        Which of those the scheduler scores highest is its own business; the pod takes its
        requests from one of them. For pods alike the count that fits is the same whichever
        it takes, since each node holds its own share.
        """
        scheduler = spec.get("schedulerName") or SCHEDULER
        if scheduler != SCHEDULER:
            return f"left to {scheduler}", set()
        head = f"0/{len(self.nodes)} nodes are available: "
        if claims:
            return f"Pending: {head}{claims}", set()
        asked = pod_requests(spec)
        why = {n.name: self.reasons(spec, asked, n) for n in self.nodes}
        fitting = {name for name, reasons in why.items() if not reasons}
        if not fitting:
            counts = Counter(r for reasons in why.values() for r in reasons)
            return "Pending: " + head + ", ".join(
                sorted(f"{n} {r}" for r, n in counts.items())
            ), set()
        taken = min(fitting)
        self.used[taken].update(asked)
        self.pods[taken] += 1
        return "bound", fitting


def outcome(pod: Mapping[str, Any]) -> str | None:
    """What became of a pod: bound, Pending with the scheduler's reason (its first sentence;
    the rest is about preemption), left to another scheduler, or None while undecided."""
    if pod["spec"].get("nodeName"):
        return "bound"
    scheduler = pod["spec"].get("schedulerName") or SCHEDULER
    if scheduler != SCHEDULER:
        return f"left to {scheduler}"
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return "Pending: " + condition.get("message", "").split(". ", 1)[0]
    return None


def claims_message(plane, namespace: str, obj: Mapping[str, Any]) -> str | None:
    """The VolumeBinding PreFilter's refusal for the pod's PersistentVolumeClaims, if any:
    a missing claim is named; an existing one stays unbound, since this cluster has no
    storage class or volume to bind it to (a StatefulSet's claims are made by its controller)."""
    spec = pod_spec(obj) or {}
    owned = {t["metadata"]["name"] for t in obj.get("spec", {}).get("volumeClaimTemplates") or []}
    if obj.get("kind") == "StatefulSet" and owned:
        return "pod has unbound immediate PersistentVolumeClaims"
    for volume in spec.get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim is None:
            continue
        found = api(plane, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
        if found is None:
            return f'persistentvolumeclaim "{claim}" not found'
        if found.get("status", {}).get("phase") != "Bound":
            return "pod has unbound immediate PersistentVolumeClaims"
    return None


def owned_pods(plane, namespace: str, uid: str) -> list[dict]:
    """The pods an object made: its own, or its ReplicaSets' or Jobs' (a Deployment's or a
    CronJob's pods are owned by those), read from the pods' `ownerReferences`."""
    owners = {uid}
    for kind in ("apps/v1/namespaces/{}/replicasets", "batch/v1/namespaces/{}/jobs"):
        for child in api(plane, "/apis/" + kind.format(namespace))["items"]:
            if any(o["uid"] == uid for o in child["metadata"].get("ownerReferences") or []):
                owners.add(child["metadata"]["uid"])
    pods = api(plane, f"/api/v1/namespaces/{namespace}/pods")["items"]
    return [
        p
        for p in pods
        if p["metadata"]["uid"] == uid
        or any(o["uid"] in owners for o in p["metadata"].get("ownerReferences") or [])
    ]


def outcomes(pods: Iterable[Mapping[str, Any]]) -> Counter:
    """How many pods came to each outcome (None counts the undecided)."""
    return Counter(outcome(p) for p in pods)


# --- the corpus on the cluster: what is stored, what is refused, where the pods go ---------


@dataclass(frozen=True)
class Expected:
    """What should become of a created object's pods: their outcomes, why there are none
    (for an object whose controller makes none), and the nodes a bound one may be on."""

    pods: Counter
    none: str | None = None
    nodes: frozenset[str] = frozenset()


def expect(plane, namespace: str, obj: Mapping[str, Any], fleet: Fleet) -> Expected:
    """The pods an admitted object will have and what the scheduler will do with them.

    Counts follow the controllers: a Deployment, ReplicaSet or ReplicationController makes
    `replicas`; a StatefulSet one pod at a time (`OrderedReady`: the next waits for a Ready one,
    pkg/controller/statefulset/stateful_set_control.go, and no kubelet makes one Ready); a Job
    `parallelism` capped by `completions`, none while suspended (pkg/controller/job); a
    DaemonSet one per node its selectors admit (pkg/controller/daemon `NodeShouldRunDaemonPod`).
    A template naming a ServiceAccount that does not exist makes none: the ServiceAccount
    admission plugin refuses each pod (plugin/pkg/admission/serviceaccount/admission.go).
    """
    kind, spec, template = obj["kind"], obj.get("spec") or {}, pod_spec(obj) or {}
    if kind == "DaemonSet":
        nodes = frozenset(n.name for n in fleet.nodes if pod_fits_node(template, n.labels))
        return Expected(Counter({"bound": len(nodes)}), None if nodes else "no node", nodes)
    account = template.get("serviceAccountName") or template.get("serviceAccount")
    missing = kind != "Pod" and account not in (None, "default")
    if missing and api(plane, f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}") is None:
        return Expected(Counter(), f'serviceaccount "{account}" not found')
    count = _pod_count(kind, spec)
    if count == 0:
        return Expected(Counter(), "suspended" if kind == "Job" else "no replicas")
    claims = claims_message(plane, namespace, obj)
    results = [fleet.schedule(template, claims) for _ in range(count)]
    return Expected(
        Counter(r for r, _ in results), None, frozenset().union(*(n for _, n in results))
    )


def _pod_count(kind: str, spec: Mapping[str, Any]) -> int:
    if kind == "Pod":
        return 1
    if kind == "Job":
        return (
            0
            if spec.get("suspend")
            else min(spec.get("parallelism", 1), spec.get("completions") or 1 << 31)
        )
    if kind == "StatefulSet" and spec.get("podManagementPolicy") != "Parallel":
        return min(spec.get("replicas", 1), 1)
    return spec.get("replicas", 1)


def observe(plane, namespace: str, obj: Mapping[str, Any]) -> Expected:
    """What became of a created object's pods, read from the cluster now."""
    uid, kind = obj["metadata"]["uid"], obj["kind"]
    pods = owned_pods(plane, namespace, uid)
    nodes = frozenset(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName"))
    if pods:
        return Expected(outcomes(pods), None, nodes)
    now = api(plane, _path(obj)) or {}
    status = now.get("status") or {}
    if kind == "DaemonSet":
        seen = status.get("observedGeneration") == now["metadata"]["generation"]
        return Expected(
            Counter(), "no node" if seen and not status.get("desiredNumberScheduled") else None
        )
    if kind == "Job":
        suspended = any(
            c["type"] == "Suspended" and c["status"] == "True"
            for c in status.get("conditions") or []
        )
        return Expected(Counter(), "suspended" if suspended else None)
    for failed in _failures(plane, namespace, uid, now):
        # pods "x-" is forbidden: error looking up service account ns/sa: serviceaccount "sa"
        # not found
        return Expected(Counter(), failed.rsplit(": ", 1)[-1])
    return Expected(Counter(), None)


def _path(obj: Mapping[str, Any]) -> str:
    group, _, version = obj["apiVersion"].rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    plural = obj["kind"].lower() + "s"  # every kind with a pod template
    return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}/{obj['metadata']['name']}"


def _failures(plane, namespace: str, uid: str, obj: Mapping[str, Any]) -> list[str]:
    """The ReplicaFailure messages of a ReplicaSet or ReplicationController, or of the
    ReplicaSets a Deployment owns (the controller's word on pods it could not create)."""
    sets = [obj] + [
        rs
        for rs in api(plane, f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
        if any(o["uid"] == uid for o in rs["metadata"].get("ownerReferences") or [])
    ]
    return [
        c["message"]
        for s in sets
        for c in (s.get("status") or {}).get("conditions") or []
        if c["type"] == "ReplicaFailure" and c["status"] == "True"
    ]
