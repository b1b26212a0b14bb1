"""`review --nodes` against kube-scheduler: the pods it calls unschedulable stay Pending with
the scheduler's reason naming the same taint or resource, and those it calls schedulable are
bound.

Two Nodes of the test's own form a GRID-T4-4Q-like pool with a memory label no other node
carries, tainted `vgpu=t4:NoSchedule` and offering `nvidia.com/gpu: 1` (given a kubelet's
status, `tools/cluster/fleet.py`). The nodes file is what the apiserver lists then (the
fleet's Nodes and every other test's too), as `kubectl get nodes -o yaml` would write it.
The pods are review's output, created as it prints them: lwgpu's decision, then the
scheduler's (taint_toleration.go `Filter`: "node(s) had untolerated taint(s)";
noderesources/fit.go `fitsRequest`: "Insufficient rdma/hca").
"""

from __future__ import annotations

import json

import pytest

from tests.cluster.placement import outcome
from tests.support.builders import container, pod
from tests.support.cli import run_cli
from tools.cluster.fleet import status
from tools.waiting import wait_for

pytestmark = pytest.mark.cluster

MEM = "aliyun.accelerator/nvidia_mem"
POLICY = """apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: t4}
spec:
  namespaces: {include: ["*"]}
  profiles:
  - name: GRID-T4-4Q
    memory: 3831Mi
    nodeSelector: {aliyun.accelerator/nvidia_mem: 3831MiB}
"""
TAINT = {"key": "vgpu", "value": "t4", "effect": "NoSchedule"}
# name -> (tolerations, extra limits), and what review and the scheduler say of it
PODS = {
    "untolerated": ([], {}),
    "tolerated": ([{"key": "vgpu", "operator": "Exists"}], {}),
    "no-rdma": ([{"key": "vgpu", "operator": "Exists"}], {"rdma/hca": 1}),
}


def test_review_nodes_says_what_the_scheduler_does(control_plane, namespace, own_nodes, tmp_path):
    for _ in range(2):
        name = own_nodes.create("t4-tainted", {MEM: "3831MiB", "kubernetes.io/os": "linux"})
        own_nodes.core.patch_node(name, {"spec": {"taints": [TAINT]}})
        own_nodes.core.patch_node_status(
            name, {"status": status({"status": {"capacity": {"nvidia.com/gpu": "1"}}})}
        )
    nodes = tmp_path / "nodes.json"
    nodes.write_text(control_plane.kubectl("get", "nodes", "-o", "json").stdout)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    manifests = []
    for name, (tolerations, extra) in PODS.items():
        spec = pod(container(limits={"aliyun.com/gpu-mem": 3, **extra}), name=name)
        spec["spec"]["tolerations"] = tolerations
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(spec))
        manifests.append(str(path))
    args = ("review", *manifests, "--policies", str(policy), "--nodes", str(nodes), "-n")
    code, out, err = run_cli(*args, namespace.name, "-o", "json")
    assert code == 1, err
    said = {v["ref"].rsplit("/", 1)[1]: v["schedulable"] for v in json.loads(out)}
    assert {n: s["ok"] for n, s in said.items()} == {
        "untolerated": False,
        "tolerated": True,
        "no-rdma": False,
    }
    assert "untolerated taint vgpu=t4:NoSchedule" in said["untolerated"]["reason"]
    assert "Insufficient rdma/hca" in said["no-rdma"]["reason"]

    _, admitted, _ = run_cli(*args, namespace.name, "-o", "yaml")
    namespace.kubectl("create", "-f", "-", input=admitted)
    outcomes: dict[str, str | None] = {}

    def decided() -> bool:
        found = json.loads(namespace.kubectl("get", "pods", "-o", "json").stdout)["items"]
        outcomes.update({p["metadata"]["name"]: outcome(p) for p in found})
        return len(outcomes) == len(PODS) and None not in outcomes.values()

    wait_for(decided, timeout=60, interval=0.3, what="the scheduler's verdict on every pod")
    assert outcomes["tolerated"] == "bound"
    # v1.37's scheduler no longer names the taint (taint_toleration.go `Filter`: "untolerated
    # taint(s)"); review names it, with the same count of nodes.
    assert "2 node(s) had untolerated taint(s)" in str(outcomes["untolerated"])
    assert "2 node(s) had untolerated taint vgpu=t4:NoSchedule" in said["untolerated"]["reason"]
    assert "2 Insufficient rdma/hca" in str(outcomes["no-rdma"])
