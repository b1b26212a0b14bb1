"""The corpus on a mixed fleet (vgn5i lightweight nodes, a full T4 pool, an ACK cGPU pool;
`tests/data/nodes/mixed-fleet.yaml`) under `policies/examples/mixed-fleet.yaml`: every pod the
webhook admits can be scheduled wherever its author's own selectors allowed any node of the
fleet (the scheduler's node affinity filter, imitated by `tests/fakes/scheduler_affinity.py`),
a rewritten pod lands on lightweight nodes only, whole-GPU pods on none, and with
`placement: spillOver` a pod may land on every lightweight node that holds its ask.
"""

from dataclasses import replace

import pytest

from tests.fakes.scheduler_affinity import schedulable
from tests.support.builders import gpu_mem, pod
from tests.support.manifests import corpus_files, named_documents
from tests.support.paths import DATA, REPO
from webhook.api.workload import dig, group_of, template_path
from webhook.core.decision import decide
from webhook.offline.cluster import read_nodes
from webhook.policy import load_policies

MEM = "aliyun.accelerator/nvidia_mem"
NODES = read_nodes(str(DATA / "nodes" / "mixed-fleet.yaml"))
LIGHTWEIGHT = {n for n in NODES if n.startswith("vgn5i-")}
POLICY = load_policies(REPO / "policies" / "examples" / "mixed-fleet.yaml").policies[0]
CASES = [
    (where, body)
    for where, body in named_documents(corpus_files())
    if isinstance(body, dict)
    and template_path(group_of(body.get("apiVersion")), body.get("kind")) is not None
]


def final_spec(obj):
    return dig(obj, (*template_path(group_of(obj["apiVersion"]), obj["kind"]), "spec"))


def test_the_corpus_has_pods_of_both_kinds():
    outcomes = {decide(body, POLICY).reason.startswith("nvidia.com/gpu=") for _, body in CASES}
    assert outcomes == {True, False}


def fitting(obj):
    spec = final_spec(obj)
    return {name for name, labels in NODES.items() if schedulable(spec, name, labels)}


@pytest.mark.parametrize("body", [b for _, b in CASES], ids=[w for w, _ in CASES])
def test_rewritten_pods_are_schedulable_and_whole_gpus_stay_off_lightweight(body):
    decision = decide(body, POLICY)
    if decision.outcome != "mutated":
        return  # left as written: its placement is its author's
    after = fitting(decision.obj)
    if decision.profile is None:
        # A whole-GPU pod kept off the classes: off every lightweight node, and still on every
        # other node its own selectors allowed (a GKE or GPU-product selector may allow none).
        assert not after & LIGHTWEIGHT, decision.reason
        assert fitting(body) - LIGHTWEIGHT <= after
    else:
        assert after and after <= LIGHTWEIGHT, decision.reason


# Admitted pods whose own selectors match no node of this fleet (a GKE accelerator pool,
# gpushare's or the GPU operator's node labels): nothing the webhook writes could place them.
FOREIGN = {
    "AliyunContainerService__gpushare-device-plugin__device-plugin-ds.yaml#0",
    "GoogleCloudPlatform__kubernetes-engine-samples__ai-ml__llm-serving-gemma__vllm__vllm-2b-it.yaml#0",
    "GoogleCloudPlatform__kubernetes-engine-samples__batch__kueue-intro__job-team-a.yaml#0",
    "NVIDIA__gpu-operator__tests__plugin-test.yaml#0",
}


@pytest.mark.parametrize("where, body", CASES, ids=[w for w, _ in CASES])
def test_every_admitted_pod_is_schedulable_where_its_author_allowed(where, body):
    decision = decide(body, POLICY)
    if decision.outcome == "denied":
        return
    final = decision.obj if decision.outcome == "mutated" else body
    if where.rsplit("/", 1)[-1] in FOREIGN:
        assert not fitting(body)
    else:
        assert fitting(body) and fitting(final), decision.reason


SPILL = replace(POLICY, placement="spillOver")
MIB = {n: int(labels[MEM].removesuffix("MiB")) for n, labels in NODES.items() if n in LIGHTWEIGHT}


@pytest.mark.parametrize("gib", [1, 2, 3, 4, 8])
def test_spill_over_pods_land_on_every_fitting_class_and_none_too_small(gib):
    """`placement: spillOver`: every lightweight node with enough memory, and nothing else."""
    decision = decide(pod(gpu_mem(gib)), SPILL)
    assert decision.outcome == "mutated", decision.reason
    assert fitting(decision.obj) == {n for n, mib in MIB.items() if mib >= gib * 1024}
    assert decide(decision.obj, SPILL).patch == ()  # reinvocation adds nothing
