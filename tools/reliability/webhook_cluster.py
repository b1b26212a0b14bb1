"""The cluster the rollout scenarios run on: the real control plane with the test fleet's
Nodes, lwgpu installed as `kubectl apply -k deploy/` installs it, the webhook Deployment's
pods started and stopped by the stand-in kubelet as they come and go
(tools/cluster/pod_lifecycle.py), and a namespace for the creates.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.cluster import controlplane, fleet, install
from tools.cluster.__main__ import FLEET
from tools.cluster.controlplane import ControlPlane
from tools.cluster.install import NAMESPACE, Installation
from tools.cluster.pod_lifecycle import PodLifecycle
from tools.waiting import wait_for

DEPLOYMENT = "deployment/lwgpu-webhook"
LOAD_NAMESPACE = "rollout"
SETTLE_S = 180  # for the replicas to be replaced


@dataclass
class Cluster:
    """The control plane, lwgpu in it, its pods followed, and the namespace of the creates."""

    plane: ControlPlane
    installation: Installation
    pods: PodLifecycle
    replicas: int
    namespace: str = LOAD_NAMESPACE

    def names(self) -> set[str]:
        """The names of the webhook's pods now."""
        return {p["metadata"]["name"] for p in self.pods.pods()}

    def settled(self, replaced: set[str]) -> bool:
        """True once none of `replaced` is left and the Deployment's replicas all run Ready."""
        pods = self.pods.pods()
        return (
            len(pods) == self.replicas
            and not {p["metadata"]["name"] for p in pods} & replaced
            and all(ready(p) and p["metadata"]["name"] in self.pods.kubelet.pods for p in pods)
        )

    def wait_settled(self, replaced: set[str]) -> None:
        """Wait until `settled(replaced)`."""
        wait_for(
            functools.partial(self.settled, replaced),
            SETTLE_S,
            interval=0.2,
            what=f"{', '.join(sorted(replaced))} replaced by Ready pods",
        )


def ready(pod: dict[str, Any]) -> bool:
    """Whether a pod (`kubectl get -o json`) has the condition Ready."""
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@contextlib.contextmanager
def cluster(workdir: Path) -> Iterator[Cluster]:
    """A control plane with the test fleet and lwgpu installed, its webhook pods followed."""
    with controlplane.running(workdir / "control-plane") as plane:
        fleet.create(plane, FLEET)
        with (
            install.installed(plane, workdir / "pods") as installation,
            PodLifecycle(installation) as pods,
        ):
            plane.kubectl("create", "namespace", LOAD_NAMESPACE)
            deployment = plane.kubectl("get", DEPLOYMENT, "-n", NAMESPACE, "-o", "json")
            replicas = json.loads(deployment.stdout)["spec"]["replicas"]
            yield Cluster(plane, installation, pods, replicas)
