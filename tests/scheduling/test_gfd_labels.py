"""Nodes labelled by NVIDIA GPU Feature Discovery (GFD) rather than the cloud: the "looks
lightweight" rule, discovery's classes, and pins on GFD's labels, rule by rule.

The label values are GFD's (github.com/NVIDIA/k8s-device-plugin internal/lm/resource.go:
`NewGPUResourceLabeler` writes `nvidia.com/gpu.memory` as the integer MiB, `baseLabeler`
`.product`, `.count`, `.replicas` and `.sharing-strategy`, which is `none` unless
`replicas > 1`; `getProductName` appends `-SHARED` to a shared GPU's product).
"""

from __future__ import annotations

import pytest

from tests.support.builders import container, pod
from tests.support.paths import DATA
from tests.support.policies import policy_from_yaml
from webhook.core.decision import decide
from webhook.offline.cluster import read_nodes
from webhook.scheduling import looks_lightweight, memory_mib, profiles_from_labels, shared_by

MEM, NAME, COUNT = (f"aliyun.accelerator/nvidia_{k}" for k in ("mem", "name", "count"))
GFD_MEM, PRODUCT, GFD_COUNT = (f"nvidia.com/gpu.{k}" for k in ("memory", "product", "count"))
SHARING, REPLICAS = "nvidia.com/gpu.sharing-strategy", "nvidia.com/gpu.replicas"


def gfd(mib: int, product: str, count: int = 1, replicas: int = 1, strategy: str = "none"):
    """A GFD-labelled node's GPU labels."""
    return {
        GFD_MEM: str(mib),
        PRODUCT: product,
        GFD_COUNT: str(count),
        REPLICAS: str(replicas),
        SHARING: strategy,
        "nvidia.com/vgpu.present": "true",
    }


@pytest.mark.parametrize(
    ("labels", "mib"),
    [
        ({MEM: "7611MiB"}, 7611),
        ({GFD_MEM: "4096"}, 4096),
        # the cloud's label is read first; a node carrying both is read by it
        ({MEM: "15109MiB", GFD_MEM: "15360"}, 15109),
        ({MEM: "15GiB", GFD_MEM: "15360"}, 15360),
        ({GFD_MEM: "4096MiB"}, None),
        ({GFD_MEM: "4Gi"}, None),
        ({GFD_MEM: "-1"}, None),
        ({NAME: "GRID-T4-4Q"}, None),
    ],
)
def test_memory_is_read_from_either_label(labels, mib):
    assert memory_mib(labels) == mib


@pytest.mark.parametrize(
    ("labels", "lightweight", "shared"),
    [
        (gfd(4096, "GRID-T4-4Q"), True, None),
        ({GFD_MEM: "4096"}, True, None),  # memory only counts as one unshared GPU
        (gfd(40960, "NVIDIA-A100-SXM4-40GB", count=4), False, None),
        (
            gfd(15360, "Tesla-T4-SHARED", replicas=4, strategy="time-slicing"),
            False,
            f"{SHARING}=time-slicing",
        ),
        (gfd(15360, "Tesla-T4-SHARED", replicas=2, strategy="mps"), False, f"{SHARING}=mps"),
        # GFD releases before the strategy label say sharing by replicas alone
        ({GFD_MEM: "15360", REPLICAS: "4"}, False, f"{REPLICAS}=4"),
        # replicas 0: sharing disabled in the plugin's config (`getReplicas`)
        (gfd(4096, "GRID-T4-4Q", replicas=0), True, None),
        # both labellers: one GPU by each
        ({MEM: "4096MiB", COUNT: "1", **gfd(4096, "GRID-T4-4Q")}, True, None),
        ({MEM: "4096MiB", COUNT: "1", **gfd(4096, "GRID-T4-4Q", count=2)}, False, None),
        ({**gfd(4096, "GRID-T4-4Q"), "ack.node.gpu.schedule": "cgpu"}, False, None),
        ({PRODUCT: "GRID-T4-4Q", GFD_COUNT: "1"}, False, None),  # no memory label
    ],
    ids=[
        "vgpu",
        "memory-only",
        "four-gpus",
        "time-sliced",
        "mps",
        "replicas-only",
        "sharing-disabled",
        "both-labellers",
        "counts-disagree",
        "ack-cgpu-key",
        "no-memory",
    ],
)
def test_looks_lightweight_by_gfd_labels(labels, lightweight, shared):
    assert looks_lightweight(labels) is lightweight
    assert shared_by(labels) == shared


def summary(profiles):
    return [(p.name, p.memory_mib, dict(p.node_selector), dict(p.node_labels)) for p in profiles]


T4_4Q = {PRODUCT: "GRID-T4-4Q"}


@pytest.mark.parametrize(
    ("labels_by_node", "expected"),
    [
        (
            {"a": gfd(4096, "GRID-T4-4Q"), "b": gfd(4096, "GRID-T4-4Q"), "c": gfd(2048, "T4-2Q")},
            [
                ("T4-2Q", 2048, {GFD_MEM: "2048"}, {PRODUCT: "T4-2Q"}),
                ("GRID-T4-4Q", 4096, {GFD_MEM: "4096"}, T4_4Q),
            ],
        ),
        # one node, both labellers: one class, on the cloud's label; both GPU labels pin it
        (
            {"a": {MEM: "4096MiB", NAME: "GRID-T4-4Q", **gfd(4096, "GRID-T4-4Q")}},
            [
                (
                    "GRID-T4-4Q",
                    4096,
                    {MEM: "4096MiB"},
                    {NAME: "GRID-T4-4Q", GFD_MEM: "4096", **T4_4Q},
                )
            ],
        ),
        # the cloud labels one of two nodes: GFD's label is the one that selects both
        (
            {"a": {MEM: "4096MiB", **gfd(4096, "GRID-T4-4Q")}, "b": gfd(4096, "GRID-T4-4Q")},
            [("GRID-T4-4Q", 4096, {GFD_MEM: "4096"}, T4_4Q)],
        ),
        # no one label on both: one class per label, names kept apart
        (
            {"a": {MEM: "4096MiB", NAME: "GRID-T4-4Q"}, "b": gfd(4096, "GRID-T4-4Q")},
            [
                ("GRID-T4-4Q", 4096, {MEM: "4096MiB"}, {NAME: "GRID-T4-4Q"}),
                ("GRID-T4-4Q-4096", 4096, {GFD_MEM: "4096"}, T4_4Q),
            ],
        ),
        # products disagree: named after the memory, no product to pin by
        (
            {"a": gfd(4096, "GRID-T4-4Q"), "b": gfd(4096, "GRID-A2-4Q")},
            [("4096MiB", 4096, {GFD_MEM: "4096"}, {})],
        ),
        # time-sliced, MPS-shared and 4-GPU nodes are no class
        (
            {
                "ts": gfd(15360, "Tesla-T4-SHARED", replicas=4, strategy="time-slicing"),
                "mps": gfd(16384, "Tesla-V100-SHARED", replicas=2, strategy="mps"),
                "a100": gfd(40960, "NVIDIA-A100-SXM4-40GB", count=4),
                "bad": {GFD_MEM: "4Gi"},
            },
            [],
        ),
    ],
    ids=["gfd-only", "both-on-one-node", "gfd-selects-all", "split", "products-disagree", "none"],
)
def test_discovery_from_gfd_labels(labels_by_node, expected):
    assert summary(profiles_from_labels(labels_by_node)) == expected


def test_discovery_on_the_gfd_fleet_takes_the_vgpu_nodes_only():
    """tests/data/nodes/gfd-vgpu-fleet.yaml: the vGPU nodes become the classes of
    examples/policies/gfd-vgpu.yaml; the time-sliced T4 and the A100 node none."""
    nodes = read_nodes(str(DATA / "nodes" / "gfd-vgpu-fleet.yaml"))
    found = profiles_from_labels({n: node.labels for n, node in nodes.items()})
    assert summary(found) == [
        (f"GRID-T4-{g}Q", g * 1024, {GFD_MEM: str(g * 1024)}, {PRODUCT: f"GRID-T4-{g}Q"})
        for g in (2, 4, 8)
    ]


# A GFD policy as examples/policies/gfd-vgpu.yaml writes its classes; and the same classes as
# discovery makes them from nodes both labellers label, selected on the cloud's label.
GFD_POLICY = """apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: gfd}
spec:
  profiles:
  - {name: T4-2Q, memory: 2Gi, nodeSelector: {nvidia.com/gpu.memory: '2048'},
     nodeLabels: {nvidia.com/gpu.product: T4-2Q}}
  - {name: T4-4Q, memory: 4Gi, nodeSelector: {nvidia.com/gpu.memory: '4096'},
     nodeLabels: {nvidia.com/gpu.product: T4-4Q}}
  - {name: T4-8Q, memory: 8Gi, nodeSelector: {nvidia.com/gpu.memory: '8192'},
     nodeLabels: {nvidia.com/gpu.product: T4-8Q}}
"""
DISCOVERING = """apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: found}
spec:
  discoverProfiles: true
  profiles: [{name: never, memory: 64Gi, nodeSelector: {example.com/none: x}}]
"""
BOTH = profiles_from_labels(
    {
        f"n{g}": {MEM: f"{g * 1024}MiB", NAME: f"T4-{g}Q", **gfd(g * 1024, f"T4-{g}Q")}
        for g in (2, 4, 8)
    }
)


def expression(key, operator, *values):
    term = {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    return {"nodeAffinity": required}


@pytest.mark.parametrize(
    ("selector", "affinity", "chosen"),
    [
        ({}, None, "T4-2Q"),  # no pin: the best fit of 2Gi
        ({PRODUCT: "T4-8Q"}, None, "T4-8Q"),
        ({GFD_MEM: "4096"}, None, "T4-4Q"),
        ({}, expression(GFD_MEM, "Gt", "3000"), "T4-4Q"),  # GFD's memory is an integer
        ({}, expression(PRODUCT, "In", "T4-4Q", "T4-8Q"), "T4-4Q"),
        ({}, expression(GFD_MEM, "Lt", "3000"), "T4-2Q"),
    ],
    ids=["none", "product", "memory", "memory-Gt", "product-In", "memory-Lt"],
)
@pytest.mark.parametrize("policy", ["static", "discovered"])
def test_pins_on_gfd_labels_are_understood(policy, selector, affinity, chosen):
    """A 2Gi pod pinning a class by GFD's product or memory label gets that class, as a pin
    on nvidia_name or nvidia_mem does: from a static GFD policy's nodeLabels, and from the
    classes discovery makes of nodes labelled by both."""
    loaded = (
        policy_from_yaml(GFD_POLICY)
        if policy == "static"
        else policy_from_yaml(DISCOVERING).with_discovered(BOTH)
    )
    spec = pod(container(limits={"aliyun.com/gpu-mem": 2}), node_selector=selector or None)
    if affinity:
        spec["spec"]["affinity"] = affinity
    decision = decide(spec, loaded)
    assert (decision.outcome, decision.profile) == ("mutated", chosen)


def test_a_pin_on_a_product_no_class_has_is_refused_in_its_own_words():
    spec = pod(container(limits={"aliyun.com/gpu-mem": 2}), node_selector={PRODUCT: "T4-16Q"})
    decision = decide(spec, policy_from_yaml(GFD_POLICY))
    assert decision.outcome == "denied"
    assert f"nodeSelector {PRODUCT}=T4-16Q matches no lightweight GPU class" in decision.reason
