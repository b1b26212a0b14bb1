"""The StatefulSet controller, for Pods; a test double of `pkg/controller/statefulset`.

`sync` is `updateStatefulSet` (stateful_set_control.go) with every pod ready at once: the
update revision is `<set>-<hash of the template>` (a ControllerRevision's name); each ordinal
below `spec.replicas` has a pod `<set>-<ordinal>` built by `newVersionedStatefulSetPod`
(stateful_set_utils.go: `GetPodFromTemplate`, the name, `initIdentity`'s hostname, subdomain
and `statefulset.kubernetes.io/pod-name` / `apps.kubernetes.io/pod-index` labels, and the
`controller-revision-hash` label); a pod of another revision is deleted and created again
(RollingUpdate, all at once here; OnDelete leaves it); ordinals at or above `replicas` go.
Each Pod CREATE is one the webhooks see.

Left out: ControllerRevision objects, partitions, ordered readiness, volume claims.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import Store
from tests.fakes.controller_utils import compute_hash, key, owned, pod_from_template, replicas

REVISION = "controller-revision-hash"


def revision(statefulset: dict) -> str:
    """The name of the revision of the set's current template."""
    return f"{statefulset['metadata']['name']}-{compute_hash(statefulset['spec']['template'])}"


def versioned_pod(statefulset: dict, ordinal: int) -> dict:
    """`newVersionedStatefulSetPod` for `ordinal`."""
    pod = pod_from_template(statefulset["spec"]["template"], statefulset)
    name = f"{statefulset['metadata']['name']}-{ordinal}"
    meta = pod["metadata"]
    del meta["generateName"]
    meta["name"] = name
    meta["labels"] = {
        **meta.get("labels", {}),
        "statefulset.kubernetes.io/pod-name": name,
        "apps.kubernetes.io/pod-index": str(ordinal),
        REVISION: revision(statefulset),
    }
    pod["spec"]["hostname"] = name
    if statefulset["spec"].get("serviceName"):
        pod["spec"]["subdomain"] = statefulset["spec"]["serviceName"]
    return pod


@dataclass
class StatefulSetController:
    """Syncs StatefulSets into Pods."""

    store: Store
    refused: list[Result] = field(default_factory=list)

    def sync(self, statefulset: dict) -> int:
        """One `updateStatefulSet`; the number of writes it made."""
        if statefulset["metadata"].get("deletionTimestamp"):
            return 0
        namespace = statefulset["metadata"]["namespace"]
        pods = {
            p["metadata"]["name"]: p
            for p in owned(self.store.of_kind("", "Pod", namespace), statefulset)
        }
        rolling = (statefulset["spec"].get("updateStrategy") or {}).get("type") != "OnDelete"
        writes = 0
        for ordinal in range(replicas(statefulset)):
            pod = pods.pop(f"{statefulset['metadata']['name']}-{ordinal}", None)
            if pod is not None:
                if not rolling or pod["metadata"]["labels"].get(REVISION) == revision(statefulset):
                    continue
                self.store.delete(key(pod))
                writes += 1
            result = self.store.create(versioned_pod(statefulset, ordinal), namespace)
            writes += 1
            if not result.allowed:
                self.refused.append(result)
                return writes
        for pod in pods.values():  # ordinals at or above spec.replicas
            self.store.delete(key(pod))
            writes += 1
        return writes
