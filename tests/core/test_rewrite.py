"""What the decision writes and where it stops (SPEC §3): the shape of a rewritten pod, the
seed Deployment, every workload kind rewritten at its template, what is out of scope, and a
policy's tolerations and defaults.
"""

import pytest
import yaml

from tests.support.builders import MEM, container, gpu_mem, pod, workload
from tests.support.paths import EXAMPLES
from tests.support.policies import default_policies, default_policy
from webhook.core.decision import decide
from webhook.policy import load_documents

DEFAULT = default_policy()
# kind -> (apiVersion, path of the pod template)
WORKLOADS = {
    "Deployment": ("apps/v1", ("spec", "template")),
    "StatefulSet": ("apps/v1", ("spec", "template")),
    "DaemonSet": ("apps/v1", ("spec", "template")),
    "ReplicaSet": ("apps/v1", ("spec", "template")),
    "ReplicationController": ("v1", ("spec", "template")),
    "Job": ("batch/v1", ("spec", "template")),
    "CronJob": ("batch/v1", ("spec", "jobTemplate", "spec", "template")),
}


def test_rewrite_shape():
    """Memory removed from limits and requests; GPU in limits (and requests, since it named one)."""
    obj = pod(
        container(
            limits={"aliyun.com/gpu-mem": 2, "cpu": "1"},
            requests={"aliyun.com/gpu-mem": 2, "cpu": "500m"},
        ),
        node_selector={"disktype": "ssd"},
    )
    result = decide(obj, DEFAULT).obj
    assert result["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "500m", "nvidia.com/gpu": "1"},
    }
    assert result["spec"]["nodeSelector"] == {"disktype": "ssd", MEM: "2048MiB"}
    assert result["metadata"]["annotations"] == {
        "lwgpu.io/profile": "GRID-P4-2Q",
        "lwgpu.io/rewritten-from": "aliyun.com/gpu-mem=2",
    }


def test_hami_core_share_goes_with_the_memory_request():
    obj = pod(
        container(
            limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}
        )
    )
    limits = decide(obj, DEFAULT).obj["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1}
    whole = pod(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30}))
    assert decide(whole, DEFAULT).obj is whole  # no memory request: nothing to rewrite


def test_seed_deployment_unchanged_and_gpu_mem_form_becomes_seed_form():
    seed = yaml.safe_load((EXAMPLES / "cuda-sample.yaml").read_text())
    asked = yaml.safe_load((EXAMPLES / "cuda-sample-gpu-mem.yaml").read_text())
    unchanged = decide(seed, DEFAULT)
    assert unchanged.outcome == "allowed" and unchanged.obj is seed
    rewritten = decide(asked, DEFAULT).obj
    annotations = rewritten["spec"]["template"]["metadata"].pop("annotations")
    assert rewritten == seed
    assert annotations == {
        "lwgpu.io/profile": "GRID-P4-2Q",
        "lwgpu.io/rewritten-from": "aliyun.com/gpu-mem=2",
    }


@pytest.mark.parametrize("kind", WORKLOADS)
def test_every_workload_kind_is_rewritten_at_its_template(kind):
    obj = workload(WORKLOADS[kind][0], kind, pod(gpu_mem(4)))
    decision = decide(obj, DEFAULT)
    assert decision.outcome == "mutated" and decision.profile == "GRID-P4-4Q"
    prefix = "/" + "/".join(WORKLOADS[kind][1]) + "/"
    assert all(op["path"].startswith(prefix) for op in decision.patch)
    # An UPDATE that changed the template (no oldObject to compare) is rewritten too, except a
    # Job's: its template is immutable (pkg/apis/batch/validation, ValidateJobSpecUpdate).
    updated = "skipped" if kind == "Job" else "mutated"
    assert decide(obj, DEFAULT, operation="UPDATE").outcome == updated


@pytest.mark.parametrize("kind", WORKLOADS)
def test_workload_denials_name_the_template_field(kind):
    decision = decide(workload(WORKLOADS[kind][0], kind, pod(gpu_mem(2), nodeName="n1")), DEFAULT)
    path = ".".join(WORKLOADS[kind][1])
    assert decision.outcome == "denied" and decision.reason.startswith(f"{path}.spec.nodeName:")


@pytest.mark.parametrize(
    "obj, operation, kind",
    [
        (pod(gpu_mem(2)), "UPDATE", None),  # pod specs are immutable
        (pod(gpu_mem(2)), "DELETE", None),
        (pod(gpu_mem(2)), "CONNECT", None),
        (workload("batch.volcano.sh/v1alpha1", "Job", pod(gpu_mem(2))), "CREATE", None),
        (pod(gpu_mem(2)), "CREATE", ("metrics.k8s.io", "Pod")),
        ({"apiVersion": "v1", "kind": "Pod"}, "CREATE", None),
        ({"apiVersion": "v1", "kind": "Pod", "spec": None}, "CREATE", None),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": []}}, "CREATE", None),
        (None, "CREATE", None),
        ("text", "CREATE", None),
        (
            workload("apps/v1", "Deployment", pod(gpu_mem(2)))
            | {"metadata": {"annotations": {"lwgpu.io/skip": "true"}}},
            "CREATE",
            None,
        ),
    ],
)
def test_out_of_scope_is_skipped(obj, operation, kind):
    decision = decide(obj, DEFAULT, operation=operation, kind=kind)
    assert decision.outcome == "skipped" and decision.obj is obj


def test_ungoverned_namespace_is_skipped():
    assert default_policies().for_namespace("kube-system") is None
    assert decide(pod(gpu_mem(2)), None).outcome == "skipped"


POLICY_WITH_TOLERATIONS = """
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: tainted}
spec:
  profiles:
  - name: small
    memory: 2Gi
    tolerations: [{key: vgpu, operator: Exists, effect: NoSchedule}]
  whenNoProfileFits: ignore
  maxGPUsPerPod: 2
"""


def test_profile_tolerations_and_defaults():
    errors = []
    (policy,) = load_documents(POLICY_WITH_TOLERATIONS, "inline", errors)
    existing = [{"key": "other", "operator": "Exists"}]
    result = decide(pod(gpu_mem(1), tolerations=existing), policy)
    assert result.obj["spec"]["tolerations"] == [
        *existing,
        {"key": "vgpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert result.obj["spec"]["nodeSelector"] == {MEM: "2048MiB"}
    assert decide(result.obj, policy).outcome == "allowed"
    ignored = decide(pod(gpu_mem(3)), policy)
    assert ignored.outcome == "allowed" and "fits no lightweight GPU" in ignored.warnings[0]
    assert decide(pod(gpu_mem(1), gpu_mem(1, name="b")), policy).outcome == "mutated"
