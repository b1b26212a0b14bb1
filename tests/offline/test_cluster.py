"""Checks against real nodes (`--nodes FILE`) over a mixed fleet built from the seed's labels:
vgn5i lightweight nodes, a full T4 pool with four GPUs per node, an ACK cGPU pool."""

import json
from pathlib import Path

import pytest

from tests.support.builders import container, gpu_mem, pod
from tests.support.cli import run_cli
from tests.support.paths import DATA, EXAMPLE_POLICIES
from webhook.core.decision import decide
from webhook.files import load_policies
from webhook.offline.cluster import read_nodes, unschedulable

NODES = str(DATA / "nodes" / "mixed-fleet.yaml")
MIXED = str(EXAMPLE_POLICIES / "mixed-fleet.yaml")
T4 = str(EXAMPLE_POLICIES / "t4-vgpu-fleet.yaml")


def test_the_mixed_fleet_example_passes_against_its_fleet():
    code, out, _ = run_cli("policy", "check", MIXED, "--nodes", NODES)
    assert code == 0
    assert "warning" not in out and out.startswith("ok: ")


def test_a_policy_for_another_fleet_is_warned_about():
    code, out, _ = run_cli("policy", "check", T4, "--nodes", NODES)
    assert code == 0  # warnings, not errors: the policy itself is valid
    warnings = out.splitlines()[1:]
    assert sum("matches no node" in w for w in warnings) == 4  # the four T4 vGPU classes
    assert any("node vgn5i-2q-1" in w and "no class selects it" in w for w in warnings)
    assert not any("t4-full" in w for w in warnings)  # four GPUs: a full pool, not ours


def test_avoid_lightweight_without_other_gpu_nodes_is_warned_about(tmp_path):
    only_lightweight = tmp_path / "nodes.yaml"
    text = (DATA / "nodes" / "mixed-fleet.yaml").read_text()
    kept = [chunk for chunk in text.split("\n- ") if "t4-full" not in chunk and "cgpu" not in chunk]
    only_lightweight.write_text("\n- ".join(kept))
    assert not any(n.startswith(("t4", "cgpu")) for n in read_nodes(str(only_lightweight)))
    code, out, _ = run_cli("policy", "check", MIXED, "--nodes", str(only_lightweight))
    assert code == 0 and "no GPU node outside the lightweight classes" in out


FLEET = read_nodes(NODES)
LIGHTWEIGHT = {n: labels for n, labels in FLEET.items() if n.startswith("vgn5i")}
POLICY = load_policies(MIXED).policies[0]


@pytest.mark.parametrize("gib", [1, 2, 3, 4, 8])
def test_rewritten_memory_asks_land_on_a_lightweight_node(gib):
    decision = decide(pod(gpu_mem(gib)), POLICY)
    assert decision.outcome == "mutated"
    assert not unschedulable(decision.obj["spec"], LIGHTWEIGHT)


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_whole_gpu_pods_land_on_no_lightweight_node(gpus):
    decision = decide(pod(container(limits={"nvidia.com/gpu": gpus})), POLICY)
    assert decision.outcome == "mutated"
    assert unschedulable(decision.obj["spec"], LIGHTWEIGHT)
    assert not unschedulable(decision.obj["spec"], FLEET)  # the T4 pool takes them


def test_an_unreadable_nodes_file_exits_2(tmp_path):
    absent = tmp_path / "absent.yaml"
    unreadable = f"error: {absent}: cannot read: no such file or directory"
    code, out, err = run_cli("policy", "check", MIXED, "--nodes", str(absent))
    assert code == 2 and out == ""
    assert err == f"python -m webhook policy check: {unreadable}\n"
    code, _, err = run_cli("review", MIXED, "--nodes", str(absent))
    assert code == 2
    assert err.splitlines()[-1] == f"python -m webhook review: {unreadable}"


TABLE = """NAME     STATUS   ROLES    AGE   VERSION
node-a   Ready    <none>   3d    v1.32.1
"""
NOT_NODES = "only text, not objects (`kubectl get nodes` prints a table, `-o name` names)"


@pytest.mark.parametrize(
    "text, held",
    [
        (TABLE, NOT_NODES),
        ("node/node-a\nnode/node-b\n", NOT_NODES),
        (json.dumps(pod(gpu_mem(2))), "only a Pod"),
        (
            json.dumps({"kind": "List", "items": [pod(gpu_mem(2)), pod(gpu_mem(1)), {"a": 1}]}),
            "only 2 Pods and an object without a kind",
        ),
    ],
    ids=["table", "names", "a pod", "a list"],
)
def test_a_nodes_file_without_nodes_exits_2_saying_what_it_holds(tmp_path, text, held):
    """Read as an empty fleet, it reported every class as matching no node, exit 0."""
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    for command in (("policy", "check", MIXED), ("review", MIXED)):
        code, out, err = run_cli(*command, "--nodes", str(path))
        assert code == 2 and "matches no node" not in out + err, command
        assert err.splitlines()[-1].endswith(
            f"error: {path}: no Node in it, {held}; write it with"
            f" `kubectl get nodes -o yaml > {path}`"
        ), command


def test_review_names_the_governing_policy_and_checks_placement(tmp_path):
    """`review --nodes`: exit 1 when an admitted pod's final placement matches no node."""
    placed = tmp_path / "placed.json"
    placed.write_text(json.dumps(pod(gpu_mem(2))))
    code, out, _ = run_cli("review", str(placed), "-o", "json", "--nodes", NODES)
    assert code == 0
    assert json.loads(out)[0]["policy"] == "default"
    stranded = tmp_path / "stranded.json"
    stranded.write_text(json.dumps(pod(gpu_mem(2), node_selector={"example.com/pool": "a100"})))
    code, _, err = run_cli("review", str(stranded), "-o", "json", "--nodes", NODES)
    assert code == 1 and "Unschedulable:" in err
    assert "13 node(s) didn't match Pod's node affinity/selector" in err


def test_review_warns_what_policy_check_warns_and_keeps_its_exit_code(tmp_path):
    """`review --nodes` prints `policy check --nodes`'s findings on stderr, as warnings:
    placed pods still exit 0, and only an unplaceable pod makes it exit 1."""
    _, checked, _ = run_cli("policy", "check", T4, "--nodes", NODES)
    findings = [line for line in checked.splitlines() if line.startswith("warning: ")]
    assert len(findings) >= 5
    ask = tmp_path / "ask.json"
    # Left alone by T4, a memory ask stays and no node offers aliyun.com/gpu-mem: a CPU pod.
    ask.write_text(json.dumps(pod(container())))
    code, out, err = run_cli("review", str(ask), "--policies", T4, "--nodes", NODES)
    assert code == 0 and out
    assert [line for line in err.splitlines() if line.startswith("warning: ")] == findings
    code, _, err = run_cli("review", str(ask), "--policies", MIXED, "--nodes", NODES)
    assert code == 0 and "warning: " not in err  # a policy that fits its fleet: no findings


# --- taints, tolerations and allocatable (issue 32, item 3) ----------------------------------

TAINTED = str(DATA / "nodes" / "tainted-t4.yaml")
T4_CLASS = """apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: t4}
spec:
  namespaces: {include: ["*"]}
  profiles:
  - name: GRID-T4-4Q
    memory: 3840Mi
    nodeSelector: {aliyun.accelerator/nvidia_mem: 3840MiB}
"""
TOLERATING = T4_CLASS + "    tolerations: [{key: vgpu, operator: Exists, effect: NoSchedule}]\n"


def _written(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_class_whose_every_node_is_tainted_is_warned_about_with_the_fix(tmp_path):
    """Before: `ok: ...` alone, exit 0, although no rewritten pod could land."""
    code, out, _ = run_cli(
        "policy", "check", _written(tmp_path, "p.yaml", T4_CLASS), "--nodes", TAINTED
    )
    assert code == 0
    [warning] = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert (
        "class GRID-T4-4Q: every node of it has a taint its tolerations do not tolerate" in warning
    )
    assert "t4-4q-1: vgpu=t4:NoSchedule; t4-4q-2: vgpu=t4:NoSchedule" in warning
    assert "maintenance" not in warning  # PreferNoSchedule only scores
    assert warning.endswith(
        "add to the class: tolerations: "
        "[{key: vgpu, operator: Equal, value: t4, effect: NoSchedule}]"
    )
    code, out, _ = run_cli(
        "policy", "check", _written(tmp_path, "q.yaml", TOLERATING), "--nodes", TAINTED
    )
    assert code == 0 and "warning" not in out


def test_a_node_contradicting_the_class_node_labels_is_warned_about(tmp_path):
    text = TOLERATING.replace(
        "    tolerations:",
        "    nodeLabels: {aliyun.accelerator/nvidia_name: GRID-T4-8Q}\n    tolerations:",
    )
    _, out, _ = run_cli("policy", "check", _written(tmp_path, "p.yaml", text), "--nodes", TAINTED)
    assert [line.split("): ", 1)[1] for line in out.splitlines() if "warning" in line] == [
        f"class GRID-T4-4Q: node t4-4q-{i} carries its nodeSelector but "
        "aliyun.accelerator/nvidia_name=GRID-T4-4Q, against the class's nodeLabels "
        "aliyun.accelerator/nvidia_name=GRID-T4-8Q: a pod pinning the class by "
        "aliyun.accelerator/nvidia_name=GRID-T4-8Q cannot land there"
        for i in (1, 2)
    ]


def test_a_class_whose_nodes_offer_no_gpu_is_warned_about(tmp_path):
    text = Path(TAINTED).read_text().replace("      nvidia.com/gpu: '1'\n", "")
    nodes = _written(tmp_path, "nodes.yaml", text)
    _, out, _ = run_cli(
        "policy", "check", _written(tmp_path, "p.yaml", TOLERATING), "--nodes", nodes
    )
    assert (
        "class GRID-T4-4Q: none of its nodes offers nvidia.com/gpu in allocatable "
        "(t4-4q-1, t4-4q-2)" in out
    )


@pytest.mark.parametrize(
    "policy, tolerations, limits, ok, reason",
    [
        (T4_CLASS, [], {}, False, "2 node(s) had untolerated taint vgpu=t4:NoSchedule"),
        (T4_CLASS, [{"key": "vgpu", "operator": "Exists"}], {}, True, ""),
        (T4_CLASS, [{"key": "vgpu", "value": "a10"}], {}, False, "untolerated taint vgpu=t4"),
        (TOLERATING, [], {}, True, ""),
        (TOLERATING, [], {"rdma/hca": 1}, False, "2 Insufficient rdma/hca (asks 1, allocatable 0)"),
    ],
    ids=["untolerated", "pod tolerates", "other value", "class tolerates", "rdma"],
)
def test_review_marks_each_verdict_schedulable_with_the_reason(
    tmp_path, policy, tolerations, limits, ok, reason
):
    """Before: exit 0 and no `schedulable` for each of these; the pods stay Pending."""
    spec = pod(container(limits={"aliyun.com/gpu-mem": 3, **limits}))
    spec["spec"]["tolerations"] = tolerations
    manifest = _written(tmp_path, "pod.json", json.dumps(spec))
    policies = _written(tmp_path, "p.yaml", policy)
    code, out, err = run_cli(
        "review", manifest, "--policies", policies, "--nodes", TAINTED, "-o", "json"
    )
    [verdict] = json.loads(out)
    assert verdict["outcome"] == "mutated" and verdict["schedulable"]["ok"] is ok
    assert reason in verdict["schedulable"]["reason"]
    assert code == (0 if ok else 1)
    unschedulable_lines = [line for line in err.splitlines() if line.startswith("Unschedulable:")]
    assert unschedulable_lines == (
        []
        if ok
        else [
            f"Unschedulable: {manifest}#0 Pod/default/gpu: no node of {TAINTED} takes it: "
            + verdict["schedulable"]["reason"]
        ]
    )
