"""Profile discovery in the running server: Nodes' GPU labels on the API double become classes.

The real server runs with ``policies/default.yaml`` plus ``discoverProfiles: true`` and a
kubeconfig (``KUBECONFIG``) pointing at tests/fakes/kubeapi.py, which speaks the real list and
watch protocol. Nodes come and go on the double; reviews follow within seconds, and keep
being answered from the last snapshot while the double is down.
"""

from __future__ import annotations

import base64
import math
import subprocess
import sys

import orjson
import pytest

from tests.fakes.inventory import FakeInventory
from tests.support.builders import MEM, admission_review, gpu_node, gpu_pod
from tests.support.paths import REPO
from tests.support.server import free_port, serving
from tests.support.waiting import wait_for
from webhook.core.nodes import profiles_from_labels
from webhook.policy import load_policies
from webhook.server.discovered import Discovery

REVIEW = admission_review(gpu_pod({"aliyun.com/gpu-mem": 5}), uid="discovery-review")
AGE, CLASSES = "lwgpu_discovery_inventory_age_seconds", "lwgpu_discovery_classes"
# Enough fresh connections that both workers (SO_REUSEPORT spreads them) are asked.
ROUNDS = 8


@pytest.fixture(name="policy")
def fixture_policy(tmp_path):
    """The shipped policy with discovery switched on."""
    text = (REPO / "policies" / "default.yaml").read_text()
    path = tmp_path / "discovering.yaml"
    path.write_text(text.replace("spec:\n", "spec:\n  discoverProfiles: true\n", 1))
    return path


def selectors(server) -> set[str]:
    """The nvidia_mem selector each of ``ROUNDS`` reviews of the 5 GiB pod wrote."""
    seen = set()
    for _ in range(ROUNDS):
        status, body = server.review("mutate", REVIEW)
        assert status == 200, body
        seen.add(selector_of(body["response"]["patch"]))
    return seen


def selector_of(patch: str) -> str:
    """The nvidia_mem value a base64 JSON Patch puts into the pod's nodeSelector."""
    for op in orjson.loads(base64.b64decode(patch)):
        value = op.get("value")
        if op["path"].endswith("nodeSelector") and isinstance(value, dict):
            return value[MEM]
        if op["path"].endswith("nvidia_mem"):
            return value
    raise AssertionError(f"no nodeSelector in {patch}")


def gauges(server) -> tuple[float, float]:
    """(inventory age, discovered classes) as /metrics shows them."""
    samples = server.metrics()
    return samples[(AGE, frozenset())], samples[(CLASSES, frozenset())]


def test_classes_follow_the_nodes_and_survive_an_outage(tmp_path, policy, kube):
    kube.seed(gpu_node("p4-2q", "2048MiB", "GRID-P4-2Q"))
    kube.seed(gpu_node("tesla-p4", "7611MiB", "Tesla-P4"))
    config = kube.write_kubeconfig(tmp_path / "kubeconfig")
    with serving(tmp_path, policy, env={"KUBECONFIG": config}) as server:
        wait_for(lambda: selectors(server) == {"7611MiB"}, what="the discovered 7611MiB")
        wait_for(lambda: gauges(server)[1] == 2, what="two classes in /metrics")
        assert math.isfinite(gauges(server)[0])

        kube.delete("v1", "Node", "tesla-p4")
        wait_for(lambda: selectors(server) == {"8192MiB"}, what="the static 8192MiB again")
        wait_for(lambda: gauges(server)[1] == 1, what="one class in /metrics")

        kube.set_down(True)
        # Answered from the last snapshot, without waiting on the API server.
        assert selectors(server) == {"8192MiB"}
        assert server.get("/readyz")[0] == 200
        assert AGE in {name for name, _ in server.metrics()}


@pytest.mark.parametrize("discovering", [True, False], ids=["discovering", "static"])
def test_unreachable_api_server_leaves_static_profiles(tmp_path, policy, discovering):
    dead = tmp_path / "kubeconfig"
    dead.write_text(
        '{"apiVersion": "v1", "kind": "Config", "current-context": "c", '
        '"clusters": [{"name": "c", "cluster": '
        f'{{"server": "http://127.0.0.1:{free_port()}"}}}}], '
        '"users": [{"name": "u", "user": {}}], '
        '"contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}'
    )
    chosen = policy if discovering else REPO / "policies" / "default.yaml"
    with serving(tmp_path, chosen, env={"KUBECONFIG": str(dead)}) as server:
        assert selectors(server) == {"8192MiB"}
        age, classes = gauges(server)
        assert classes == 0
        # Never synced: the age is infinite while discovering, untouched (0) otherwise.
        assert math.isinf(age) if discovering else age == 0


def test_server_modules_do_not_import_the_kubernetes_client():
    code = (
        "import sys, webhook.server.gunicorn_app, webhook.server.app, webhook.server.discovered, "
        "webhook.cli; "
        "print('kubernetes' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def failing_factory():
    raise RuntimeError("no kubeconfig")


@pytest.mark.parametrize(
    "discovers,factory,started",
    [
        (True, lambda: FakeInventory(profiles_from_labels({"n": {MEM: "7611MiB"}})), True),
        (False, lambda: FakeInventory(()), False),
        (True, failing_factory, False),
    ],
    ids=["discovering", "static", "client-fails"],
)
def test_merged_policies_are_rebuilt_only_when_the_snapshot_changes(
    policy, discovers, factory, started
):
    policies = load_policies(policy if discovers else REPO / "policies" / "default.yaml")
    reports = []
    discovery = Discovery(
        report=lambda age, classes: reports.append((age, classes)), factory=factory
    )
    discovery.follow(policies)
    assert (discovery.inventory is not None) is started
    first = discovery.merged(policies)
    assert discovery.merged(policies) is first  # same policy, same snapshot tuple
    names = [p.name for p in first.policies[0].profiles]
    assert ("7611MiB" in names) is started
    if started:
        wait_for(lambda: reports, what="a gauge report")
        assert reports[0] == (1.5, 1)
        discovery.inventory.snapshot = ()  # a new tuple: the node went away
        assert discovery.merged(policies) is policies
        discovery.stop()
