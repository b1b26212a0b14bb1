"""Nodes as API objects, with no kubelet behind them: created with their labels, then given
the status a kubelet would post (`Ready`, `capacity` and `allocatable`) through the `status`
subresource, so that kube-scheduler binds pods to them. Pods never start; the proof of
placement is the binding (`spec.nodeName`).

A fleet file is a `kubectl get nodes -o yaml` List whose items carry labels, optional taints
and `status.capacity` of extended resources (`nvidia.com/gpu`); every node also gets room
for pods, CPU and memory so that only GPU placement decides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tools.cluster.controlplane import ControlPlane

BASE_CAPACITY = {"pods": "110", "cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}


def nodes(fleet: Path) -> list[dict[str, Any]]:
    """The Node objects of a fleet file."""
    items: list[dict[str, Any]] = yaml.safe_load(fleet.read_text())["items"]
    return items


def status(node: dict[str, Any]) -> dict[str, Any]:
    """The status a kubelet would report for `node`: ready, with its capacity allocatable."""
    capacity = {**BASE_CAPACITY, **node.get("status", {}).get("capacity", {})}
    return {
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "lwgpu test fleet: no kubelet, ready by declaration",
            }
        ],
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"},
    }


def create(plane: ControlPlane, fleet: Path) -> list[str]:
    """Create the fleet's Nodes with their labels, taints and a ready status; their names."""
    core = client.CoreV1Api(plane.api())
    names = []
    for node in nodes(fleet):
        meta = node["metadata"]
        labels = {"kubernetes.io/hostname": meta["name"], **meta.get("labels", {})}
        taints = [client.V1Taint(**taint) for taint in node.get("spec", {}).get("taints", [])]
        body = client.V1Node(
            metadata=client.V1ObjectMeta(name=meta["name"], labels=labels),
            spec=client.V1NodeSpec(taints=taints or None),
        )
        core.create_node(body)
        core.patch_node_status(meta["name"], {"status": status(node)})
        names.append(meta["name"])
    return names
