"""`policy check --nodes` and `review --nodes` on a fleet GPU Feature Discovery labels, with no
cloud label: examples/policies/gfd-vgpu.yaml against tests/data/nodes/gfd-vgpu-fleet.yaml
(four vGPU nodes, a T4 time-sliced into four replicas, a 4-GPU A100 node, a CPU node).
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.builders import container, pod
from tests.support.cli import run_cli
from tests.support.paths import DATA, EXAMPLE_POLICIES

POLICY = EXAMPLE_POLICIES / "gfd-vgpu.yaml"
FLEET = str(DATA / "nodes" / "gfd-vgpu-fleet.yaml")
OK = "ok: {path}#0: policy 'gfd-vgpu': GRID-T4-2Q=2048Mi, GRID-T4-4Q=4096Mi, GRID-T4-8Q={mib}Mi"
WHERE = "warning: policy 'gfd-vgpu' ({path}#0): "
SHARED = (
    "is a shared GPU (nvidia.com/gpu.sharing-strategy=time-slicing: each pod asking "
    "nvidia.com/gpu: 1 gets a replica of it and shares its memory), not lightweight"
)


def variant(tmp_path, old: str, new: str) -> str:
    """The example policy with `old` replaced by `new`, written to a file of the test's own."""
    text = POLICY.read_text()
    assert old in text
    path = tmp_path / "gfd.yaml"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize(
    ("edit", "findings"),
    [
        # the example as shipped: every class has its nodes; the shared T4 is none of them
        (None, []),
        # a discovering policy says why discovery skips the shared T4
        (
            (
                "  whenNoProfileFits: deny\n",
                "  whenNoProfileFits: deny\n  discoverProfiles: true\n",
            ),
            [
                "node t4-shared-1 (nvidia.com/gpu.memory=15360, one GPU) {shared}, so discovery "
                "makes no class of it"
            ],
        ),
        # a class that selects the shared T4, and the vGPU node no class selects any more
        (
            (
                "memory: 8Gi\n    nodeSelector: {nvidia.com/gpu.memory: '8192'}\n    nodeLabels: "
                "{nvidia.com/gpu.product: GRID-T4-8Q}",
                "memory: 15Gi\n    nodeSelector: {nvidia.com/gpu.memory: '15360'}",
            ),
            [
                "class GRID-T4-8Q: node t4-shared-1 {shared}: the class's pods get a slice of "
                "what its memory promises; select only unshared nodes (add to its nodeSelector "
                "nvidia.com/gpu.sharing-strategy: none)",
                "node vgpu-t4-8q-1 (nvidia.com/gpu.memory=8192, one GPU) looks lightweight, but "
                "no class selects it",
            ],
        ),
        # the same, discovering: discovery makes a class of the vGPU node, as the webhook would
        (
            (
                "memory: 8Gi\n    nodeSelector: {nvidia.com/gpu.memory: '8192'}\n    nodeLabels: "
                "{nvidia.com/gpu.product: GRID-T4-8Q}\n  memoryRequests:",
                "memory: 15Gi\n    nodeSelector: {nvidia.com/gpu.memory: '15360'}\n"
                "  discoverProfiles: true\n  memoryRequests:",
            ),
            [
                "class GRID-T4-8Q: node t4-shared-1 {shared}: the class's pods get a slice of "
                "what its memory promises; select only unshared nodes (add to its nodeSelector "
                "nvidia.com/gpu.sharing-strategy: none)",
            ],
        ),
        # nodeLabels the nodes contradict: pins on the product would land nowhere
        (
            ("{nvidia.com/gpu.product: GRID-T4-4Q}", "{nvidia.com/gpu.product: GRID-A2-4Q}"),
            [
                f"class GRID-T4-4Q: node vgpu-t4-4q-{i} carries its nodeSelector but "
                "nvidia.com/gpu.product=GRID-T4-4Q, against the class's nodeLabels "
                "nvidia.com/gpu.product=GRID-A2-4Q: a pod pinning the class by "
                "nvidia.com/gpu.product=GRID-A2-4Q cannot land there"
                for i in (1, 2)
            ],
        ),
    ],
    ids=[
        "example",
        "discovering",
        "selects-shared",
        "selects-shared-discovering",
        "nodeLabels-contradicted",
    ],
)
def test_policy_check_nodes_on_the_gfd_fleet(tmp_path, edit, findings):
    path = str(POLICY) if edit is None else variant(tmp_path, *edit)
    code, out, err = run_cli("policy", "check", path, "--nodes", FLEET)
    mib = 15360 if edit and "15360" in edit[1] else 8192
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        OK.format(path=path, mib=mib),
        *(WHERE.format(path=path) + f.format(shared=SHARED) for f in findings),
    ]


# name -> (limits, nodeSelector): where review says each goes on the fleet
PODS = {
    "two-gib": ({"aliyun.com/gpu-mem": 2}, None),
    "hami-3000": ({"nvidia.com/gpumem": 3000}, None),
    "pinned-8q": ({"aliyun.com/gpu-mem": 2}, {"nvidia.com/gpu.product": "GRID-T4-8Q"}),
    "too-big": ({"aliyun.com/gpu-mem": 12}, None),
    "whole": ({"nvidia.com/gpu": 2}, None),
}


def test_review_nodes_on_the_gfd_fleet(tmp_path):
    """The rewritten pods select their class by GFD's memory label and fit its nodes; the pod
    no class fits is refused; a 2-GPU pod fits the time-sliced T4 (four replicas) and the
    A100 node, no vGPU node."""
    paths = []
    for name, (limits, selector) in PODS.items():
        path = tmp_path / f"{name}.json"
        path.write_text(
            json.dumps(pod(container(limits=limits), node_selector=selector, name=name))
        )
        paths.append(str(path))
    args = ("review", *paths, "--policies", str(POLICY), "--nodes", FLEET, "-n", "ml")
    code, out, _ = run_cli(*args, "-o", "json")
    assert code == 1
    verdicts = {v["ref"].rsplit("/", 1)[1]: v for v in json.loads(out)}
    _, admitted, _ = run_cli(*args, "-o", "yaml")
    selectors = {
        obj["metadata"]["name"]: obj["spec"].get("nodeSelector")
        for obj in yaml.safe_load_all(admitted)
        if obj and verdicts[obj["metadata"]["name"]]["outcome"] == "mutated"
    }
    assert selectors == {
        "two-gib": {"nvidia.com/gpu.memory": "2048"},
        "hami-3000": {"nvidia.com/gpu.memory": "4096"},
        "pinned-8q": {"nvidia.com/gpu.product": "GRID-T4-8Q", "nvidia.com/gpu.memory": "8192"},
    }
    assert verdicts["too-big"]["outcome"] == "denied"
    assert {n: v["schedulable"]["ok"] for n, v in verdicts.items() if "schedulable" in v} == {
        "two-gib": True,
        "hami-3000": True,
        "pinned-8q": True,
        "whole": True,
    }


def test_review_nodes_gives_a_discovering_policy_the_classes_of_the_fleet(tmp_path):
    """With `--nodes`, a policy with `discoverProfiles: true` decides with the classes the
    webhook's inventory would find on those nodes: with the 4Q and 8Q classes left out of the
    policy, a pod asking 3000 MiB goes to the discovered 4096 MiB class instead of being
    refused for want of a class."""
    text = POLICY.read_text()
    start, end = text.index("  - name: GRID-T4-4Q"), text.index("  whenNoProfileFits: deny")
    path = tmp_path / "gfd.yaml"
    path.write_text(text[:start] + text[end:] + "  discoverProfiles: true\n")
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps(pod(container(limits={"nvidia.com/gpumem": 3000}))))
    args = ("review", str(manifest), "--policies", str(path), "-n", "ml", "-o", "json")
    code, out, _ = run_cli(*args)
    assert (code, json.loads(out)[0]["outcome"]) == (1, "denied")  # no class holds 3000 MiB
    code, out, _ = run_cli(*args, "--nodes", FLEET)
    verdict = json.loads(out)[0]
    assert (code, verdict["outcome"], verdict["profile"]) == (0, "mutated", "GRID-T4-4Q")
