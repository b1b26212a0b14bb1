"""Parity of the rewrite in the apiserver with the webhook, on the real kube-apiserver: every
document of the corpus (`../shared/corpus/`) and generated pods and workloads
(tests/cluster/apiserver_pods.py) are created with a server-side dry run (all of admission
runs, the response is the object as it would be stored) in a namespace the installed webhook
decides and in one only the compiled MutatingAdmissionPolicy and final-state
ValidatingAdmissionPolicy decide (tests/cluster/rewrite_sides.py), both from the same policy.
Each must be stored equal on both sides, or refused on both; lwgpu's warnings (the webhook's
alone) and the words of a refusal are left aside. `-s` prints the figures.

The corpus is held to the shipped policy; generated objects to it and to the example
policies, which the webhook is given for the while (`Installation.set_policies`): a mixed
fleet (`wholeGPUPods: avoidLightweight`, the keep-off affinity), and the per-team set, in a
`research-*` namespace (`whenNoProfileFits: ignore`, two small classes) and in one the T4
fleet governs (tolerations), the shipped policy with `allowSkip: false`, and a fleet GPU
Feature Discovery labels (classes selected and pinned by `nvidia.com/gpu.memory` and
`nvidia.com/gpu.product`).
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.cluster.apiserver_pods import ACK_PLACEMENTS, COMPANIONS, objects
from tests.cluster.rewrite_sides import Outcome, Sides, dry_create, installed, loaded, sides
from tests.cluster.test_final_state import BIG_POD, NO_SKIP_YAML, SKIPPING
from tests.support.builders import container, gpu_mem, pod
from tests.support.manifests import corpus_files, documents
from tests.support.paths import EXAMPLE_POLICIES, SHIPPED_POLICY

FILES = corpus_files()
TEAMS = (EXAMPLE_POLICIES / "per-team.yaml", EXAMPLE_POLICIES / "t4-vgpu-fleet.yaml")
GIB_2 = pod(gpu_mem(2))
MIB_2048 = pod(container(limits={"nvidia.com/gpumem": "2048"}))


def files(*paths: Path) -> dict[str, str]:
    """Policy files by name, as the webhook's ConfigMap holds them."""
    return {p.name: p.read_text() for p in paths}


# name -> (policy files, namespace prefix: the policy that governs them, a pod it rewrites)
CONFIGURATIONS = {
    "shipped": (files(SHIPPED_POLICY), "parity", GIB_2),
    "mixed fleet": (files(EXAMPLE_POLICIES / "mixed-fleet.yaml"), "parity", GIB_2),
    "research": (files(*TEAMS), "research-parity", GIB_2),
    "T4 fleet": (files(*TEAMS), "parity", MIB_2048),
    "no skipping": ({SHIPPED_POLICY.name: NO_SKIP_YAML}, "parity", GIB_2),
    "GFD fleet": (files(EXAMPLE_POLICIES / "gfd-vgpu.yaml"), "parity", GIB_2),
}
# Enough to meet every branch of the generator often, in about two minutes in all (two dry
# runs of ~0.15 s each per object here). The same examples every run, so that a failure is
# reproduced, never a flake; LWGPU_PARITY_EXAMPLES=N draws N new ones per configuration, for
# exploring (hypothesis prints the failing object, shrunk, with the seed to rerun it).
GENERATED = 60
EXPLORED = int(os.environ.get("LWGPU_PARITY_EXAMPLES", "0"))
TALLY: Counter[tuple[tuple[str, str], str]] = Counter()


def verdict(webhook: Outcome, apiserver: Outcome) -> str:
    """`stored` (`, rewritten` where lwgpu's webhook said it changed it), `refused` (equal on
    both sides), or how they differ."""
    if webhook.refused and apiserver.refused:
        return "refused"
    if webhook.refused != apiserver.refused:
        side = "the webhook" if webhook.refused else "the apiserver"
        return f"refused by {side} only: {webhook.refusal or apiserver.refusal}"
    if webhook.stored != apiserver.stored:
        return "stored differently"
    return "stored, rewritten" if any("->" in w for w in webhook.warnings) else "stored"


@pytest.fixture(scope="module", params=list(CONFIGURATIONS))
def compared(request, lwgpu) -> Iterator[Sides]:
    """The webhook serving one configuration's policies, the same compiled beside it."""
    served, prefix, probe = CONFIGURATIONS[request.param]
    plane = lwgpu.plane
    lwgpu.set_policies(served)
    try:
        with (
            installed(plane, loaded(served)),
            sides(
                plane, f"{prefix}-{list(CONFIGURATIONS).index(request.param)}-{os.getpid()}"
            ) as found,
        ):
            found.await_sides(probe)
            yield found
    finally:
        lwgpu.set_policies(files(SHIPPED_POLICY))
        for (source, outcome), count in sorted(TALLY.items()):
            if source[0] == request.param:
                print(f"parity: {request.param}: {source[1]}: {outcome}: {count}")


def compare(found: Sides, obj: dict, source: tuple[str, str]) -> tuple[Outcome, Outcome, str]:
    webhook = dry_create(found.plane, found.webhook, obj)
    apiserver = dry_create(found.plane, found.apiserver, obj)
    outcome = verdict(webhook, apiserver)
    TALLY[source, outcome.partition(":")[0]] += 1
    return webhook, apiserver, outcome


@pytest.mark.parametrize("compared", ["shipped"], indirect=True)
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_corpus_document_is_stored_or_refused_alike(compared, path):
    for doc in documents(path):
        webhook, apiserver, outcome = compare(compared, doc.body, ("shipped", "corpus"))
        assert outcome in ("stored", "stored, rewritten", "refused"), (doc.where, outcome)
        assert webhook.stored == apiserver.stored, doc.where


@pytest.mark.parametrize("compared", ["shipped"], indirect=True)
def test_the_largest_pod_is_rewritten_alike(compared):
    """100 containers (40 init, every other one a sidecar), one asking memory: the pod of
    tests/cluster/test_final_state.py, within the apiserver's CEL cost limits on both sides."""
    webhook, apiserver, outcome = compare(compared, BIG_POD, ("shipped", "largest pod"))
    assert outcome == "stored, rewritten", outcome
    assert webhook.stored == apiserver.stored


@pytest.mark.parametrize("compared", ["shipped"], indirect=True)
@pytest.mark.parametrize("case", ACK_PLACEMENTS)
def test_a_pod_naming_acks_nodes_is_left_alone_or_rewritten_alike(compared, case):
    """`leaveAlone.nodeSelectorKeys`: left alone only where every node the pod may land on
    carries the key; a pod keeping off ACK's nodes is rewritten on both sides."""
    fields, left_alone = ACK_PLACEMENTS[case]
    obj = pod(gpu_mem(2), **copy.deepcopy(fields))
    webhook, apiserver, outcome = compare(compared, obj, ("shipped", "leaveAlone"))
    assert outcome == ("stored" if left_alone else "stored, rewritten"), outcome
    assert webhook.stored == apiserver.stored


@pytest.mark.parametrize("compared", ["shipped"], indirect=True)
@pytest.mark.parametrize("case", COMPANIONS)
def test_companion_resources_go_with_the_memory_alike(compared, case):
    """HAMi's and ACK cGPU's shares leave with the memory ask on both sides (no lightweight
    node offers them); a share no policy names stays on both."""
    asked = COMPANIONS[case]
    obj = pod(container(limits=asked, requests=asked))
    webhook, apiserver, outcome = compare(compared, obj, ("shipped", "companions"))
    assert outcome == "stored, rewritten", outcome
    assert webhook.stored == apiserver.stored
    kept = set(webhook.stored["spec"]["containers"][0]["resources"]["limits"])
    assert kept == {"nvidia.com/gpu"} | ({"example.com/gpu-slices"} & set(asked)), kept


@pytest.mark.parametrize("compared", ["no skipping"], indirect=True)
@pytest.mark.parametrize("case", SKIPPING)
def test_with_allow_skip_false_a_skipped_object_is_rewritten_alike(compared, case):
    """`allowSkip: false`: `lwgpu.io/skip` on the pod or the workload exempts nothing."""
    obj = SKIPPING[case][0]
    webhook, apiserver, outcome = compare(compared, obj, ("no skipping", "lwgpu.io/skip"))
    assert outcome == "stored, rewritten", outcome
    assert webhook.stored == apiserver.stored
    assert any("ignored lwgpu.io/skip" in w for w in webhook.warnings), webhook.warnings


@settings(
    max_examples=EXPLORED or GENERATED,
    deadline=None,
    derandomize=not EXPLORED,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(obj=objects())
def test_generated_objects_are_stored_or_refused_alike(request, compared, obj):
    source = (request.node.callspec.params["compared"], "generated")
    webhook, apiserver, outcome = compare(compared, obj, source)
    assert outcome in ("stored", "stored, rewritten", "refused"), (obj, outcome)
    assert webhook.stored == apiserver.stored, obj
