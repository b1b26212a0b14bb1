"""The ReplicaSet controller; a test double of `pkg/controller/replicaset/replica_set.go`.

`sync` is `manageReplicas`: with fewer active pods than `spec.replicas` it creates the missing
ones from the template (`podControl.CreatePods` -> `GetPodFromTemplate`: `generateName`
`<replicaset>-` and a controller reference), each a Pod CREATE the webhooks see, and stops at
the first refusal as `slowStartBatch` does; with more it deletes the newest (`getPodsToDelete`
ranks unready and young pods first; here every pod is alike, so the youngest go).

Left out: expectations, adoption by selector, readiness and the burst limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import Store
from tests.fakes.controller_utils import key, owned, pod_from_template, replicas


@dataclass
class ReplicaSetController:
    """Syncs ReplicaSets (and ReplicationControllers) into Pods."""

    store: Store
    refused: list[Result] = field(default_factory=list)

    def sync(self, replica_set: dict) -> int:
        """One `manageReplicas`; the number of writes it made."""
        if replica_set["metadata"].get("deletionTimestamp"):
            return 0
        namespace = replica_set["metadata"]["namespace"]
        pods = owned(self.store.of_kind("", "Pod", namespace), replica_set)
        missing = replicas(replica_set) - len(pods)
        for _ in range(missing):
            pod = pod_from_template(replica_set["spec"]["template"], replica_set)
            result = self.store.create(pod, namespace)
            if not result.allowed:
                self.refused.append(result)
                return 1
        for pod in pods[len(pods) + missing :] if missing < 0 else []:
            self.store.delete(key(pod))
        return abs(missing)
