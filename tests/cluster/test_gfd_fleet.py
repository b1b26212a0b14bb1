"""A fleet GPU Feature Discovery labels, on the real control plane: the Nodes of
tests/data/nodes/gfd-vgpu-fleet.yaml (no cloud label: four vGPU nodes, a time-sliced T4, a
4-GPU A100 node, a CPU node) registered with their labels and a kubelet's status
(`tools/cluster/fleet.py`), examples/policies/gfd-vgpu.yaml rolled out to the installed
webhook, and kube-scheduler deciding where the rewritten pods go.

The rewritten pods select their class by `nvidia.com/gpu.memory`, which only these Nodes
carry: each is bound to a vGPU node of its class (NodeAffinity: nodeaffinity/node_affinity.go
`Filter` matches the nodeSelector against the node's labels as strings; a `Gt` requirement
compares them as integers, `nodeSelectorRequirementsAsSelector` with labels.Requirement
`Matches`), a pod that pins a class by GFD's product or memory label keeps it, and a pod
that fits no class is refused by the webhook, so the apiserver stores nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.cluster.placement import outcome
from tests.support.builders import container, pod
from tests.support.paths import DATA, EXAMPLE_POLICIES, SHIPPED_POLICY
from tests.support.policies import policy_from_yaml
from tools.cluster.fleet import nodes, status
from tools.waiting import wait_for
from webhook.core.decision import decide

pytestmark = pytest.mark.cluster

FLEET = DATA / "nodes" / "gfd-vgpu-fleet.yaml"
POLICY = (EXAMPLE_POLICIES / "gfd-vgpu.yaml").read_text()
PREFIX = "gfd-"  # the fleet's names, kept apart from the session fleet's
GFD_MEM, PRODUCT = "nvidia.com/gpu.memory", "nvidia.com/gpu.product"
GT_3000 = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": GFD_MEM, "operator": "Gt", "values": ["3000"]}]}
            ]
        }
    }
}
# name -> (limits, nodeSelector, affinity), and the fleet's nodes it may be bound to
PODS = {
    "two-gib": (({"aliyun.com/gpu-mem": 2}, None, None), {"vgpu-t4-2q-1"}),
    "hami-3000": (({"nvidia.com/gpumem": 3000}, None, None), {"vgpu-t4-4q-1", "vgpu-t4-4q-2"}),
    "pinned-8q": (({"aliyun.com/gpu-mem": 2}, {PRODUCT: "GRID-T4-8Q"}, None), {"vgpu-t4-8q-1"}),
    "memory-gt": (({"aliyun.com/gpu-mem": 2}, None, GT_3000), {"vgpu-t4-4q-1", "vgpu-t4-4q-2"}),
}


@pytest.fixture(scope="module")
def gfd_fleet(control_plane, lwgpu) -> Iterator[None]:
    """The fleet's Nodes, ready, and the GFD policy served; both undone when the module ends."""
    core = client.CoreV1Api(control_plane.api())
    created = []
    try:
        for node in nodes(FLEET):
            name = PREFIX + node["metadata"]["name"]
            labels = {**node["metadata"]["labels"], "kubernetes.io/hostname": name}
            core.create_node({"metadata": {"name": name, "labels": labels}, "spec": node["spec"]})
            created.append(name)
            core.patch_node_status(name, {"status": status(node)})
        lwgpu.set_policies({"default.yaml": POLICY})
        yield
    finally:
        lwgpu.set_policies({"default.yaml": SHIPPED_POLICY.read_text()})
        for name in created:
            core.delete_node(name)


def gfd_pod(name: str) -> dict:
    (limits, selector, affinity), _ = PODS[name]
    spec = pod(container(limits=limits), node_selector=selector, name=name)
    if affinity:
        spec["spec"]["affinity"] = affinity
    return spec


def test_rewritten_pods_land_on_their_gfd_class(gfd_fleet, namespace):
    items = [gfd_pod(name) for name in PODS]
    namespace.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    found: dict[str, dict] = {}

    def bound() -> bool:
        listed = json.loads(namespace.kubectl("get", "pods", "-o", "json").stdout)["items"]
        found.update({p["metadata"]["name"]: p for p in listed})
        return len(found) == len(PODS) and all(outcome(p) == "bound" for p in found.values())

    wait_for(bound, timeout=60, interval=0.3, what="every pod bound")
    for name, (_, allowed) in PODS.items():
        spec = found[name]["spec"]
        assert spec["nodeName"].removeprefix(PREFIX) in allowed, (name, spec["nodeName"])
        assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert found["two-gib"]["spec"]["nodeSelector"] == {GFD_MEM: "2048"}
    assert found["pinned-8q"]["spec"]["nodeSelector"] == {PRODUCT: "GRID-T4-8Q", GFD_MEM: "8192"}


def test_a_pod_no_class_fits_is_refused(gfd_fleet, namespace):
    """12 GiB: more than the largest class (GRID-T4-8Q) holds; the time-sliced T4's 15360
    MiB is no class."""
    too_big = pod(container(limits={"aliyun.com/gpu-mem": 12}), name="too-big")
    refusal = decide(too_big, policy_from_yaml(POLICY))
    assert refusal.outcome == "denied"
    created = namespace.kubectl("create", "-f", "-", input=json.dumps(too_big), check=False)
    assert created.returncode == 1
    assert refusal.reason in created.stderr
    assert namespace.kubectl("get", "pod", "too-big", check=False).returncode == 1
