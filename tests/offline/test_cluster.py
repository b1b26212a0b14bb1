"""Checks against real nodes (`--nodes FILE`) over a mixed fleet built from the seed's labels:
vgn5i lightweight nodes, a full T4 pool with four GPUs per node, an ACK cGPU pool."""

import json

import pytest

from tests.support.builders import container, gpu_mem, pod
from tests.support.cli import run_cli
from tests.support.paths import DATA, EXAMPLE_POLICIES
from webhook.core.decision import decide
from webhook.files import load_policies
from webhook.offline.cluster import read_nodes, unplaceable

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


NODE_LABELS = read_nodes(NODES)
LIGHTWEIGHT = {n: labels for n, labels in NODE_LABELS.items() if n.startswith("vgn5i")}
POLICY = load_policies(MIXED).policies[0]


@pytest.mark.parametrize("gib", [1, 2, 3, 4, 8])
def test_rewritten_memory_asks_land_on_a_lightweight_node(gib):
    decision = decide(pod(gpu_mem(gib)), POLICY)
    assert decision.outcome == "mutated"
    assert not unplaceable(decision.obj["spec"], LIGHTWEIGHT)


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_whole_gpu_pods_land_on_no_lightweight_node(gpus):
    decision = decide(pod(container(limits={"nvidia.com/gpu": gpus})), POLICY)
    assert decision.outcome == "mutated"
    assert unplaceable(decision.obj["spec"], LIGHTWEIGHT)
    assert not unplaceable(decision.obj["spec"], NODE_LABELS)  # the T4 pool takes them


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
    assert code == 1 and "Unschedulable:" in err and "match no node" in err


def test_review_warns_what_policy_check_warns_and_keeps_its_exit_code(tmp_path):
    """`review --nodes` prints `policy check --nodes`'s findings on stderr, as warnings:
    placed pods still exit 0, and only an unplaceable pod makes it exit 1."""
    _, checked, _ = run_cli("policy", "check", T4, "--nodes", NODES)
    findings = [line for line in checked.splitlines() if line.startswith("warning: ")]
    assert len(findings) >= 5
    ask = tmp_path / "ask.json"
    ask.write_text(json.dumps(pod(gpu_mem(2))))
    code, out, err = run_cli("review", str(ask), "--policies", T4, "--nodes", NODES)
    assert code == 0 and out
    assert [line for line in err.splitlines() if line.startswith("warning: ")] == findings
    code, _, err = run_cli("review", str(ask), "--policies", MIXED, "--nodes", NODES)
    assert code == 0 and "warning: " not in err  # a policy that fits its fleet: no findings
