"""Mixed fleets on the real control plane: the fleet of tests/data/nodes/mixed-fleet.yaml (vgn5i
lightweight nodes, two per class, a full T4 pool of two 4-GPU nodes, two ACK cGPU nodes, a CPU
node), examples/policies/mixed-fleet.yaml and variants of it rolled out through the ConfigMap,
and kube-scheduler deciding where every pod goes.

- `wholeGPUPods: avoidLightweight`: whole-GPU pods fill the T4 and cGPU nodes and then wait,
  beside idle lightweight GPUs; the corpus documents this policy decides otherwise than the
  shipped one are held to `review`'s prediction as in tests/cluster/test_corpus.py.
- `placement`: with a class's nodes full, `exact` leaves the next pod Pending, `spillOver` puts
  it on the larger classes and never on a smaller one nor on a whole-GPU node.
- classes of equal memory: the one listed first wins, a pin keeps the other.
- `leaveAlone`: an ACK cGPU pod is stored as written and considered for the cGPU nodes only.

Expected Pending reasons are the scheduler's own (see tests/cluster/placement.py), counted over
the 13 nodes of the fleet.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import pytest

from tests.cluster.corpus_check import check_file
from tests.cluster.placement import AFFINITY, outcome
from tests.support.builders import container, gpu_mem, pod
from tests.support.manifests import corpus_files, documents
from tests.support.paths import DATA, EXAMPLE_POLICIES, SHIPPED_POLICY
from tools.waiting import wait_for
from webhook.core.decision import decide
from webhook.files import load_policies
from webhook.offline.cluster import read_nodes

MEM = "aliyun.accelerator/nvidia_mem"
COUNT = "aliyun.accelerator/nvidia_count"
MIXED_PATH = EXAMPLE_POLICIES / "mixed-fleet.yaml"
MIXED = MIXED_PATH.read_text()
SPILL = MIXED.replace("  placement: exact\n", "  placement: spillOver\n")
LEAVE_ALONE = "  leaveAlone:\n    nodeSelectorKeys: [ack.node.gpu.schedule]\n"
NOT_LEFT_ALONE = MIXED.replace(LEAVE_ALONE, "")
NODES = {n: node.labels for n, node in read_nodes(str(DATA / "nodes" / "mixed-fleet.yaml")).items()}
LIGHTWEIGHT = {n for n in NODES if n.startswith("vgn5i-")}
T4_POOL = {n for n, labels in NODES.items() if labels.get(COUNT) == "4"}


def nodes_with(mib: int) -> set[str]:
    """The fleet's nodes labelled with this much GPU memory."""
    return {n for n, labels in NODES.items() if labels.get(MEM) == f"{mib}MiB"}


def pending(**counts: int) -> str:
    """The outcome of a pod the scheduler refused, from {reason: number of nodes}."""
    reasons = {"affinity": AFFINITY, "gpu": "Insufficient nvidia.com/gpu"}
    listed = sorted(f"{n} {reasons.get(r, r)}" for r, n in counts.items())
    return "Pending: 0/13 nodes are available: " + ", ".join(listed)


@pytest.fixture(scope="module")
def roll(lwgpu):
    """Roll a policy out (`roll(text)`); the shipped one is restored when the module ends."""
    try:
        yield lambda text: lwgpu.set_policies({"default.yaml": text})
    finally:
        lwgpu.set_policies({"default.yaml": SHIPPED_POLICY.read_text()})


def create(namespace, *pods: dict) -> None:
    """Create pods in one request, as `kubectl create -f` of a List."""
    namespace.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    )


def placed(namespace, names: list[str], want: Counter) -> dict[str, str | None]:
    """Wait until the pods' outcomes are `want` (bound, or Pending with the scheduler's
    reason); return each pod's node. A difference left after 60 s fails with both."""
    seen: dict[str, dict] = {}

    def settled() -> bool:
        found = json.loads(namespace.kubectl("get", "pods", "-o", "json").stdout)["items"]
        seen.clear()
        seen.update({p["metadata"]["name"]: p for p in found if p["metadata"]["name"] in names})
        return Counter(outcome(p) for p in seen.values()) == want

    with contextlib.suppress(TimeoutError):  # the assertion below says what differs
        wait_for(settled, timeout=60, interval=0.3, what=f"{want}")
    assert Counter(outcome(p) for p in seen.values()) == want
    return {name: p["spec"].get("nodeName") for name, p in seen.items()}


# --- the corpus under the mixed-fleet policy -------------------------------------------------

SHIPPED_ONE = load_policies(SHIPPED_POLICY).policies[0]
MIXED_ONE = load_policies(MIXED_PATH).policies[0]
DIFFERING = [
    path
    for path in corpus_files()
    if any(
        isinstance(doc.body, dict)
        and decide(doc.body, SHIPPED_ONE).obj != decide(doc.body, MIXED_ONE).obj
        for doc in documents(path)
    )
]
KEPT_OFF = {
    doc.where.rsplit("/", 1)[-1]
    for path in DIFFERING
    for doc in documents(path)
    if isinstance(doc.body, dict)
    and (d := decide(doc.body, MIXED_ONE)).outcome == "mutated"
    and d.profile is None
}


def test_the_corpus_has_whole_gpu_pods_the_mixed_policy_keeps_off_lightweight():
    assert len(KEPT_OFF) >= 10
    assert "NVIDIA__gpu-operator__tests__gpu-pod.yaml#0" in KEPT_OFF


@pytest.mark.parametrize("path", DIFFERING, ids=[p.name for p in DIFFERING])
def test_corpus_documents_the_mixed_policy_decides_otherwise(roll, namespace, path):
    roll(MIXED)
    outcomes = check_file(namespace.plane, path, namespace.name, MIXED_PATH)
    for result in outcomes:
        print(f"{result.name}: {result.text} {sorted(result.nodes)}")
        if result.name in KEPT_OFF:
            assert not result.nodes & LIGHTWEIGHT, result


# --- leaveAlone -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "limits", "want"),
    [
        # Left to ACK: only the cGPU nodes are considered; they do not offer ACK's resource
        # here (no ACK device plugin runs on this fleet).
        (
            MIXED,
            {"aliyun.com/gpu-mem": "2"},
            pending(affinity=11, **{"Insufficient aliyun.com/gpu-mem": 2}),
        ),
        # Without leaveAlone the pod is rewritten onto a class no cGPU node carries.
        (NOT_LEFT_ALONE, {"nvidia.com/gpu": "1"}, pending(affinity=13)),
    ],
    ids=["leaveAlone", "without-leaveAlone"],
)
def test_ack_cgpu_pods_are_left_to_ack(roll, namespace, policy, limits, want):
    roll(policy)
    create(namespace, pod(gpu_mem(2), node_selector={"ack.node.gpu.schedule": "cgpu"}, name="cgpu"))
    placed(namespace, ["cgpu"], Counter({want: 1}))
    stored = namespace.get("pod", "cgpu")
    assert stored["spec"]["containers"][0]["resources"]["limits"] == limits


# --- wholeGPUPods ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "want", "lightweight"),
    [
        # The shipped policy (wholeGPUPods: allow) lets them onto lightweight nodes.
        (SHIPPED_POLICY.read_text(), Counter({"bound": 11}), True),
        # Ten whole GPUs stand outside the classes (4 + 4 on the T4 pool, 1 + 1 on cGPU): the
        # eleventh pod waits, though eight lightweight GPUs are idle.
        (MIXED, Counter({"bound": 10, pending(gpu=5, affinity=8): 1}), False),
    ],
    ids=["allow", "avoidLightweight"],
)
def test_whole_gpu_pods_are_kept_off_lightweight_nodes(roll, namespace, policy, want, lightweight):
    roll(policy)
    names = [f"whole-{i}" for i in range(11)]
    create(namespace, *(pod(container(limits={"nvidia.com/gpu": 1}), name=n) for n in names))
    nodes = placed(namespace, names, want)
    assert any(n in LIGHTWEIGHT for n in nodes.values()) == lightweight, nodes


# --- placement: exact and spillOver ---------------------------------------------------------

MIB = {n: int(labels[MEM].removesuffix("MiB")) for n, labels in NODES.items() if n in LIGHTWEIGHT}


def fill_2048mib_nodes(namespace) -> None:
    """Pods already in lightweight form (one GPU on the 2048MiB class) on both 2048MiB nodes."""
    fillers = [f"filler-{i}" for i in range(2)]
    pinned = container(limits={"nvidia.com/gpu": 1})
    create(namespace, *(pod(pinned, node_selector={MEM: "2048MiB"}, name=n) for n in fillers))
    assert set(placed(namespace, fillers, Counter({"bound": 2})).values()) == nodes_with(2048)


@pytest.mark.parametrize(
    ("policy", "want", "nodes"),
    [
        (MIXED, Counter({pending(gpu=2, affinity=11): 1}), {None}),  # placement: exact
        (SPILL, Counter({"bound": 1}), nodes_with(4096) | nodes_with(8192)),
    ],
    ids=["exact", "spillOver"],
)
def test_a_full_class_spills_over_to_larger_ones_or_waits(roll, namespace, policy, want, nodes):
    roll(policy)
    fill_2048mib_nodes(namespace)
    create(namespace, pod(gpu_mem(2), name="asks-2gib"))
    assert placed(namespace, ["asks-2gib"], want)["asks-2gib"] in nodes


def test_spill_over_prefers_the_smallest_class_that_holds_the_ask(roll, namespace):
    """On this fleet every other score is equal for a pod alone, so the preferred weights
    decide: the 2048MiB class, while it has room."""
    roll(SPILL)
    create(namespace, pod(gpu_mem(2), name="asks-2gib"))
    nodes = placed(namespace, ["asks-2gib"], Counter({"bound": 1}))
    assert nodes["asks-2gib"] in nodes_with(2048)


@pytest.mark.parametrize("gib", [1, 2, 3, 4, 8])
def test_spill_over_pods_fill_every_class_that_holds_them_and_none_too_small(roll, namespace, gib):
    """One pod more than the lightweight nodes with enough memory: those nodes take one each,
    the last waits beside the smaller classes and the T4 and cGPU nodes."""
    roll(SPILL)
    fitting = {n for n, mib in MIB.items() if mib >= gib * 1024}
    names = [f"asks-{gib}gib-{i}" for i in range(len(fitting) + 1)]
    create(namespace, *(pod(gpu_mem(gib), name=n) for n in names))
    want = Counter(
        {"bound": len(fitting), pending(gpu=len(fitting), affinity=13 - len(fitting)): 1}
    )
    nodes = placed(namespace, names, want)
    assert {n for n in nodes.values() if n} == fitting


TWO_KEYS = """\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: two-keys}
spec:
  placement: spillOver
  profiles:
  - {name: GRID-P4-1Q, memory: 1Gi}
  - {name: GRID-P4-2Q, memory: 2Gi}
  - name: T4-pool
    memory: 4Gi
    nodeSelector: {aliyun.accelerator/nvidia_count: "4"}
  - {name: GRID-P4-8Q, memory: 8Gi}
"""


def test_spill_over_across_two_label_keys_uses_every_fitting_class(roll, namespace):
    """Classes selecting on two keys (memory for the P4 classes, GPU count for a T4 pool) are
    two ways onto a node: a 2 GiB ask may go to 2048MiB, 8192MiB and T4 nodes, and twelve
    such pods fill all of them (2 + 2 + 4 + 4 GPUs), none on 1024MiB or unlisted 4096MiB."""
    roll(TWO_KEYS)
    names = [f"asks-2gib-{i}" for i in range(13)]
    create(namespace, *(pod(gpu_mem(2), name=n) for n in names))
    nodes = placed(namespace, names, Counter({"bound": 12, pending(gpu=6, affinity=7): 1}))
    assert {n for n in nodes.values() if n} == nodes_with(2048) | nodes_with(8192) | T4_POOL


# --- classes of equal memory ----------------------------------------------------------------

P4_2Q = "  - {name: GRID-P4-2Q, memory: 2Gi}\n"
T4_2G = "  - {name: T4-2G, memory: 2Gi, nodeSelector: {aliyun.accelerator/nvidia_count: '4'}}\n"
EQUAL = "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\nmetadata: {name: equal}\n"


@pytest.mark.parametrize(
    ("classes", "pin", "nodes"),
    [
        (P4_2Q + T4_2G, None, nodes_with(2048)),  # listed first wins the tie
        (P4_2Q + T4_2G, {COUNT: "4"}, T4_POOL),  # a pin keeps the other class
        (T4_2G + P4_2Q, None, T4_POOL),
    ],
    ids=["P4-first", "pinned-T4", "T4-first"],
)
def test_of_two_classes_of_equal_memory_the_first_listed_or_the_pinned_one_is_used(
    roll, namespace, classes, pin, nodes
):
    roll(EQUAL + "spec:\n  profiles:\n" + classes)
    create(namespace, pod(gpu_mem(2), node_selector=pin, name="asks-2gib"))
    assert placed(namespace, ["asks-2gib"], Counter({"bound": 1}))["asks-2gib"] in nodes
