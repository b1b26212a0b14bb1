"""`review --cluster`: the live cluster's workloads and Nodes, read with LIST only, as the
documents and nodes `review` decides and checks.

The workloads are every kind the webhook reviews (`webhook.api.workload.TEMPLATE_PATHS`)
but those a reviewed workload controls: a ReplicaSet of a Deployment, a Job of a CronJob
and the pods of any of them are made from their owner's template, which is reviewed itself
(the rule of `webhook.core.lifecycle`), and the next one made from it is reviewed at its
CREATE. A pod of another controller (an operator's) is reviewed, as the webhook reviews it.

A stored object carries what the apiserver adds: `status` and the identity and bookkeeping
fields of `metadata`. They are stripped, so that `-o diff` shows only lwgpu's change and
`-o yaml` can be applied again; what remains is what the object's next writer sends.
The decision is the one the webhook makes when the object's pod template is next written (a
CREATE, or an UPDATE that changes the template: a new image, `kubectl rollout restart`); an
UPDATE that leaves the template alone (scaling, labels) is never rewritten, and a Pod or a
Job, whose template cannot change, gets that decision when it is created again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webhook.api.workload import TEMPLATE_PATHS, as_map
from webhook.core.lifecycle import controller_of
from webhook.kube.listing import PAGE, ListError, Resource, list_objects

from .cluster import Nodes, fleet_node, node_name
from .manifests import Manifest

if TYPE_CHECKING:
    # webhook.kube alone imports the client (webhook/kube/__init__.py); this module reaches
    # it through webhook.kube.listing.
    from kubernetes import client

# Every kind the webhook reviews, in the order `review --cluster` lists them.
WORKLOADS = (
    Resource("apps/v1", "Deployment", "deployments"),
    Resource("apps/v1", "StatefulSet", "statefulsets"),
    Resource("apps/v1", "DaemonSet", "daemonsets"),
    Resource("apps/v1", "ReplicaSet", "replicasets"),
    Resource("v1", "ReplicationController", "replicationcontrollers"),
    Resource("batch/v1", "CronJob", "cronjobs"),
    Resource("batch/v1", "Job", "jobs"),
    Resource("v1", "Pod", "pods"),
)
NODES = Resource("v1", "Node", "nodes", namespaced=False)
# Written by the apiserver, never by the object's author (k8s.io/apimachinery, meta/v1
# ObjectMeta: "Populated by the system. Read-only.").
SERVER_METADATA = (
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
)
WHERE = "cluster"  # where every object of a cluster review was found


def reviewed_controller(obj: Any) -> bool:
    """True when a kind the webhook reviews controls `obj`: its template is the owner's."""
    owner = controller_of(obj)
    return owner is not None and owner[:2] in TEMPLATE_PATHS


def as_written(obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object without what the apiserver adds: `status` and `SERVER_METADATA`."""
    metadata = {k: v for k, v in as_map(obj.get("metadata")).items() if k not in SERVER_METADATA}
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": metadata, **rest}


def workloads(api: client.ApiClient, namespace: str | None, limit: int = PAGE) -> list[Manifest]:
    """The reviewed workloads of `namespace` (None: all), as written, ordered by namespace,
    then kind (`WORKLOADS`), then name; raises `ListError`."""
    found: list[tuple[tuple[str, int, str], dict[str, Any]]] = []
    for rank, resource in enumerate(WORKLOADS):
        for obj in list_objects(api, resource, namespace, limit):
            if reviewed_controller(obj):
                continue
            metadata = as_map(obj.get("metadata"))
            key = (str(metadata.get("namespace")), rank, str(metadata.get("name")))
            found.append((key, as_written(obj)))
    return [Manifest(WHERE, obj) for _, obj in sorted(found, key=lambda pair: pair[0])]


@dataclass(frozen=True)
class LiveNodes:
    """The cluster's Nodes: as the findings read them (labels, taints, allocatable), and
    their labels as stored (what discovery reads); or, where they may not be listed, the
    apiserver's refusal."""

    nodes: Nodes
    stored_labels: dict[str, dict[str, str]]
    refused: str = ""


def live_nodes(api: client.ApiClient, limit: int = PAGE) -> LiveNodes:
    """Every Node; a 403 is no error (the ClusterRole `view` grants no Nodes: the
    review goes on without them) but `refused`. Raises `ListError` for anything else."""
    try:
        nodes = list(list_objects(api, NODES, None, limit))
    except ListError as err:
        if err.status != 403:
            raise
        return LiveNodes({}, {}, str(err))
    return LiveNodes(
        {node_name(n): fleet_node(n) for n in nodes},
        {node_name(n): _strings(as_map(as_map(n.get("metadata")).get("labels"))) for n in nodes},
    )


def _strings(labels: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if isinstance(v, str)}
