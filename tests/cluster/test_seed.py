"""The seed's story on the real control plane: `kubectl apply` of the cuda-sample Deployment
asking `aliyun.com/gpu-mem: 2` prints lwgpu's warning, the Deployment is stored rewritten,
kube-controller-manager makes its ReplicaSet and Pod, and kube-scheduler binds the Pod to a
`2048MiB` node of the fleet; a pod asking for two lightweight GPUs is refused with lwgpu's
message on kubectl's stderr. The expected words come from the pure decision, so the test
checks that the cluster says what the decision says.
"""

from __future__ import annotations

import json

import yaml

from tests.support.builders import container, pod
from tests.support.paths import EXAMPLES, SHIPPED_POLICY
from tools.waiting import wait_for
from webhook.core.decision import decide
from webhook.files import load_policies

SEED = EXAMPLES / "cuda-sample-gpu-mem.yaml"
MEM = "aliyun.accelerator/nvidia_mem"


def nodes_labelled(plane, value: str) -> set[str]:
    """The fleet's nodes whose GPU memory label is `value`."""
    found = json.loads(plane.kubectl("get", "nodes", "-l", f"{MEM}={value}", "-o", "json").stdout)
    return {n["metadata"]["name"] for n in found["items"]}


def test_the_seed_deployment_is_rewritten_and_its_pod_bound_to_a_2048mib_node(lwgpu, namespace):
    manifest = yaml.safe_load(SEED.read_text())
    decision = decide(manifest, load_policies(SHIPPED_POLICY).for_namespace(namespace.name))
    assert decision.outcome == "mutated"

    applied = namespace.kubectl("apply", "-f", str(SEED))

    assert applied.stdout.strip() == "deployment.apps/cuda-sample created"
    assert [f"Warning: {w}" for w in decision.warnings] == applied.stderr.strip().splitlines()
    stored = namespace.get("deployment", "cuda-sample")
    want = decision.obj["spec"]["template"]["spec"]
    assert stored["spec"]["template"]["spec"]["nodeSelector"] == want["nodeSelector"]
    resources = stored["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": "1"}

    def bound() -> str | None:
        found = json.loads(
            namespace.kubectl("get", "pods", "-l", "app=cuda-sample", "-o", "json").stdout
        )
        names = [p["spec"].get("nodeName") for p in found["items"]]
        return names[0] if names and names[0] else None

    node = wait_for(bound, timeout=60, what="the cuda-sample pod to be bound")
    assert node in nodes_labelled(namespace.plane, "2048MiB")


def test_a_pod_asking_for_two_lightweight_gpus_is_refused_with_lwgpus_message(lwgpu, namespace):
    two = pod(
        container(limits={"nvidia.com/gpu": "2"}),
        node_selector={MEM: "2048MiB"},
    )
    decision = decide(two, load_policies(SHIPPED_POLICY).for_namespace(namespace.name))
    assert decision.outcome == "denied"

    created = namespace.kubectl("create", "-f", "-", input=json.dumps(two), check=False)

    assert created.returncode == 1
    assert created.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": admission webhook'
        ' "mutate.lwgpu.io"'
        f" denied the request: {decision.reason}"
    )
    assert namespace.kubectl("get", "pods", "-o", "name").stdout == ""
