"""`kubectl apply --dry-run=server -o yaml` on the real control plane: the webhook is called as
for a real request (sideEffects None lets the apiserver call it for a dry run, with `dryRun:
true` in the review: staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/
webhook.go, `Dispatch`), the output shows lwgpu's rewrite and its warnings, and nothing is
stored. The real apply after it is answered the same way and stores what the dry run showed.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.cluster.admission_support import ABSENT, Calls, at
from tests.support.builders import container, pod, workload
from tests.support.paths import SHIPPED_POLICY
from webhook.core.decision import decide
from webhook.files import load_policies

GPU_MEM_POD = pod(container(limits={"aliyun.com/gpu-mem": 2}))
SEED_POD = pod(
    container(limits={"nvidia.com/gpu": "1"}),
    node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"},
)
GPU_DEPLOYMENT = workload("apps/v1", "Deployment", GPU_MEM_POD)
GPU_DEPLOYMENT["spec"]["replicas"] = 0  # no pods: the namespace's only requests are the test's
GPU_DEPLOYMENT["spec"]["template"]["metadata"] = {"labels": {"app": "gpu"}}
# object, kind and name for kubectl get, the decision's outcome on it
CASES = {
    "gpu memory pod": (GPU_MEM_POD, "pod", "mutated"),
    "pod in the lightweight form": (SEED_POD, "pod", "allowed"),
    "gpu memory deployment": (GPU_DEPLOYMENT, "deployment", "mutated"),
}


@pytest.mark.parametrize("case", CASES)
def test_dry_run_shows_the_rewrite_stores_nothing_and_matches_the_real_apply(
    lwgpu, namespace, case
):
    obj, resource, outcome = CASES[case]
    decision = decide(obj, load_policies(SHIPPED_POLICY).for_namespace(namespace.name))
    assert decision.outcome == outcome
    kind = obj["kind"]
    dry_calls = Calls(lwgpu)

    dry = namespace.kubectl(
        "apply", "--dry-run=server", "-o", "yaml", "-f", "-", input=json.dumps(obj)
    )

    shown = yaml.safe_load(dry.stdout)
    absent = namespace.kubectl("get", resource, "gpu", check=False)
    assert absent.returncode == 1 and "NotFound" in absent.stderr
    dry_seen = dry_calls.since(namespace.name, kind)
    assert sorted(c["endpoint"] for c in dry_seen) == ["mutate"]
    assert all(c["dry_run"] for c in dry_seen)
    warnings = [f"Warning: {w}" for w in decision.warnings]
    assert dry.stderr.splitlines() == warnings
    assert decision.patch or outcome == "allowed"
    for op in decision.patch:
        assert carries(shown, op), op

    real_calls = Calls(lwgpu)
    real = namespace.kubectl("apply", "-f", "-", input=json.dumps(obj))

    real_seen = real_calls.since(namespace.name, kind)
    assert sorted(c["endpoint"] for c in real_seen) == ["mutate"]
    assert not any(c["dry_run"] for c in real_seen)
    decided = [{c["endpoint"]: c["decision"] for c in seen} for seen in (real_seen, dry_seen)]
    assert decided[0] == decided[1]
    assert real.stderr.splitlines() == warnings
    stored = namespace.get(resource, "gpu")
    for op in decision.patch:
        assert carries(stored, op), op
    # (the token volume's name is made anew for each create: compare what lwgpu writes)
    resources = [[c["resources"] for c in pod_spec(o)["containers"]] for o in (stored, shown)]
    assert resources[0] == resources[1]
    assert pod_spec(stored).get("nodeSelector") == pod_spec(shown).get("nodeSelector")


def carries(obj: dict, op: dict) -> bool:
    """Whether `obj` holds what a patch operation of lwgpu's writes. A map it adds may hold
    more: client-side `kubectl apply` adds its last-applied-configuration annotation first."""
    found = at(obj, op["path"])
    if op["op"] == "remove":
        return found is ABSENT
    if isinstance(op["value"], dict) and isinstance(found, dict):
        return op["value"].items() <= found.items()
    return found == op["value"]


def pod_spec(obj: dict) -> dict:
    """The pod spec of a Pod or of a workload's pod template."""
    return (obj["spec"].get("template") or obj)["spec"]
