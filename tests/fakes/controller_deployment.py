"""The deployment controller, for ReplicaSets; a test double of `pkg/controller/deployment`.

One `sync` does what `syncDeployment` does with ReplicaSets, as if every pod became ready at once:

- `FindNewReplicaSet` (util/deployment_util.go): of the ReplicaSets the Deployment controls,
  oldest first, the first whose template `EqualIgnoreHash` its own;
- none found: `getNewReplicaSet` (sync.go) creates `<deployment>-<hash>`, the template with the
  `pod-template-hash` label, the selector with it too, a controller reference and the wanted
  replicas. When that name exists and is not the Deployment's own template (a webhook changed
  it, say) it is a hash collision: `status.collisionCount` goes up and the next sync creates
  another name. `created` counts the ReplicaSets made per Deployment: churn shows there;
- scaling: the new ReplicaSet to `spec.replicas`, the others to 0, each a plain UPDATE of the
  ReplicaSet's `spec.replicas` (sync.go `scaleReplicaSet` -> `ReplicaSets().Update`), which
  the webhooks see.

Left out: rollout pacing (maxSurge, maxUnavailable, Recreate's order), revisions and their
annotations, adoption by selector, paused Deployments, progress conditions.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import Store, StoreError
from tests.fakes.controller_utils import (
    POD_TEMPLATE_HASH,
    compute_hash,
    controlled_by,
    controller_ref,
    equal_ignore_hash,
    key,
    owned,
    replicas,
)


def find_new_replica_set(deployment: dict, replica_sets: list[dict]) -> dict | None:
    """`FindNewReplicaSet`: the oldest ReplicaSet whose template is the Deployment's."""
    ordered = sorted(replica_sets, key=lambda rs: rs["metadata"]["creationTimestamp"])
    template = deployment["spec"]["template"]
    return next((rs for rs in ordered if equal_ignore_hash(rs["spec"]["template"], template)), None)


def new_replica_set(deployment: dict, collision_count: int | None) -> dict:
    """The ReplicaSet `getNewReplicaSet` creates for the Deployment's template."""
    template = copy.deepcopy(deployment["spec"]["template"])
    digest = compute_hash(template, collision_count)
    labels = {**((template.get("metadata") or {}).get("labels") or {}), POD_TEMPLATE_HASH: digest}
    template.setdefault("metadata", {})["labels"] = labels
    selector = copy.deepcopy(deployment["spec"]["selector"])
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: digest}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{deployment['metadata']['name']}-{digest}",
            "namespace": deployment["metadata"]["namespace"],
            "labels": dict(labels),
            "ownerReferences": [controller_ref(deployment)],
        },
        "spec": {"replicas": replicas(deployment), "selector": selector, "template": template},
    }


@dataclass
class DeploymentController:
    """Syncs Deployments into ReplicaSets; counts what it creates and what was refused."""

    store: Store
    created: Counter[str] = field(default_factory=Counter)
    refused: list[Result] = field(default_factory=list)

    def sync(self, deployment: dict) -> int:
        """One `syncDeployment`; the number of writes it made."""
        if deployment["metadata"].get("deletionTimestamp"):
            return 0
        namespace = deployment["metadata"]["namespace"]
        replica_sets = owned(self.store.of_kind("apps", "ReplicaSet", namespace), deployment)
        new = find_new_replica_set(deployment, replica_sets)
        writes = 0
        if new is None:
            new, writes = self._create(deployment)
            if new is None:
                return writes
            replica_sets.append(new)
        for rs in replica_sets:
            wanted = replicas(deployment) if rs["metadata"]["uid"] == new["metadata"]["uid"] else 0
            if replicas(rs) != wanted:
                result = self.store.change(
                    key(rs), lambda o, n=wanted: o["spec"].update(replicas=n)
                )
                writes += 1
                if not result.allowed:
                    self.refused.append(result)
        return writes

    def _create(self, deployment: dict) -> tuple[dict | None, int]:
        """`getNewReplicaSet`'s create, with its hash-collision handling."""
        collisions = (deployment.get("status") or {}).get("collisionCount")
        replica_set = new_replica_set(deployment, collisions)
        try:
            result = self.store.create(replica_set, deployment["metadata"]["namespace"])
        except StoreError as error:
            if error.reason != "AlreadyExists":
                raise
            existing = self.store.get(key(replica_set))
            if existing and controlled_by(existing, deployment):
                template = deployment["spec"]["template"]
                if equal_ignore_hash(template, existing["spec"]["template"]):
                    return existing, 1
            status = {"collisionCount": (collisions or 0) + 1}
            self.store.update_status(key(deployment), status)
            return None, 2
        if not result.allowed:
            self.refused.append(result)
            return None, 1
        self.created[deployment["metadata"]["name"]] += 1
        return result.obj, 1
