"""Profile discovery in the running server: Nodes' GPU labels on the real kube-apiserver of the
session (tests/support/cluster.py) become classes.

The real server runs with ``policies/default.yaml`` plus ``discoverProfiles: true`` and a
kubeconfig (``KUBECONFIG``) of a ServiceAccount holding the rules of the shipped
lwgpu-discovery ClusterRole (deploy/components/discovery, the install's discovery option).
The fleet's GPU classes are discovered from the start; a Node of the test's own adds a class,
and when it goes the class goes; while kube-apiserver is down, reviews are answered from the
last snapshot, and after its restart the Nodes are followed again. Discovery's own logic
(when the merged policies are rebuilt, what it reports) runs on FakeInventory
(tests/fakes/inventory.py): a snapshot replaced on demand and an exact age, which a real
inventory cannot give; tests/kube/test_fake_inventory.py holds it to NodeInventory.
"""

from __future__ import annotations

import base64
import math
import subprocess
import sys
import threading

import orjson
import pytest
from kubernetes import client

from tests.fakes.inventory import FakeInventory
from tests.support.builders import MEM, NAME, admission_review, gpu_pod
from tests.support.paths import REPO
from tools.loopback.server import free_port, serving
from tools.waiting import wait_for
from webhook.files import load_policies
from webhook.scheduling import profiles_from_labels
from webhook.server.state.discovery import Discovery

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


def discovered(plane) -> int:
    """How many classes the GPU-labelled Nodes of the cluster make now."""
    nodes = client.CoreV1Api(plane.api()).list_node(label_selector=MEM).items
    return len(profiles_from_labels({n.metadata.name: n.metadata.labels for n in nodes}))


def test_classes_follow_the_nodes_and_survive_an_apiserver_restart(
    tmp_path, policy, control_plane, own_nodes, service_accounts
):
    kubeconfig = service_accounts.create("webhook")
    service_accounts.grant("webhook", "../components/discovery/discovery.yaml", "lwgpu-discovery")
    p4 = own_nodes.create("tesla-p4", {MEM: "7611MiB", NAME: "Tesla-P4"})
    with serving(tmp_path, policy, env={"KUBECONFIG": str(kubeconfig)}) as server:
        # 7611MiB is ours; the fleet's and the static classes offer 8192MiB at best
        wait_for(lambda: selectors(server) == {"7611MiB"}, 60, what="the discovered 7611MiB")
        classes = discovered(control_plane)
        wait_for(lambda: gauges(server)[1] == classes, 60, what=f"{classes} classes in /metrics")
        assert math.isfinite(gauges(server)[0])

        # The stop runs aside (it may wait out the apiserver's grace period); the start is this
        # thread's: components start with PR_SET_PDEATHSIG, which fires when the thread that
        # started them ends.
        stopping = threading.Thread(target=control_plane.stop, args=("kube-apiserver",))
        stopping.start()
        try:
            wait_for(lambda: control_plane_down(control_plane), 60, what="kube-apiserver to stop")
            # Answered from the last snapshot, without waiting on the API server.
            assert selectors(server) == {"7611MiB"}
            assert server.get("/readyz")[0] == 200
            assert AGE in {name for name, _ in server.metrics()}
        finally:
            stopping.join(60)
            control_plane.restart_apiserver()  # already stopped: starts it and awaits /readyz

        own_nodes.delete(p4)
        wait_for(lambda: selectors(server) == {"8192MiB"}, 60, what="8192MiB again")
        wait_for(lambda: gauges(server)[1] == classes - 1, 60, what="one class fewer")


def control_plane_down(plane) -> bool:
    """kube-apiserver no longer accepts connections."""
    try:
        plane.get("/readyz")
    except OSError:
        return True
    return False


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
        "import sys, webhook.server.master, webhook.server.app.wsgi, "
        "webhook.server.state.discovery, webhook.cli; "
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
