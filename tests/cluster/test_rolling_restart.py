"""The webhook's replicas replaced under a stream of creates through the real kube-apiserver:
a `kubectl rollout restart` and a node drain, with the stand-in kubelet running `preStop`,
SIGTERM and the grace period as kubelet does (tools/cluster/pod_lifecycle.py). The same
scenarios, longer and at higher rates, are `python -m tools.reliability.rollout`
(docs/RELIABILITY.md).

These tests change which pods serve and cordon nodes, so they run on a control plane of their
own (`webhook_cluster.cluster`), not on the session's `lwgpu`.
"""

from __future__ import annotations

import pytest

from tests.support.cluster import require_binaries
from tools.reliability import rollout
from tools.reliability.creates import CreateStream
from tools.reliability.webhook_cluster import Cluster, cluster, ready

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory):
    """A control plane with lwgpu installed and its webhook pods followed."""
    require_binaries()
    with cluster(tmp_path_factory.mktemp("rollout")) as c:
        yield c


def serving(c: Cluster) -> dict[str, str]:
    """The webhook's pods that are Ready and run here, by name, with their node."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in c.pods.pods()
        if ready(p) and p["metadata"]["name"] in c.pods.kubelet.pods
    }


def test_a_rollout_restart_under_creates_fails_none(webhook):
    before = webhook.names()

    row = rollout.restart(webhook, rate=10, seconds=20)

    assert row["creates"] >= 200
    assert (row["failed"], row["unrewritten"]) == (0, 0), row["errors"]
    after = serving(webhook)
    assert len(after) == 2 and not set(after) & before
    assert webhook.names() == set(after)  # the old pods are gone, not just stopped
    # Both containers of both old pods stopped on SIGTERM, none killed at the grace period.
    assert row["exit_codes"] == [0, 0, 0, 0]


def test_a_drain_cannot_evict_the_second_replica_while_the_first_is_not_ready(webhook):
    (first, node_a), (second, node_b) = sorted(serving(webhook).items(), key=lambda p: p[1])
    assert node_a != node_b
    webhook.plane.kubectl("cordon", node_a, node_b)
    try:
        with CreateStream(webhook.plane, webhook.namespace, 10, 10_000) as stream:
            with webhook.pods.holding_starts():  # the first one's replacement stays not Ready
                webhook.plane.kubectl(*rollout.DRAIN, node_a, "--timeout=120s")
                refused = webhook.plane.kubectl(*rollout.DRAIN, node_b, "--timeout=3s", check=False)
                assert first not in webhook.names()
                assert second in serving(webhook)
            webhook.plane.kubectl(*rollout.DRAIN, node_b, "--timeout=120s")
            webhook.wait_settled({first, second})
            stream.stop()
    finally:
        webhook.plane.kubectl("uncordon", node_a, node_b)

    assert refused.returncode == 1
    assert rollout.PDB_REFUSAL in refused.stderr
    assert "global timeout reached: 3s" in refused.stderr
    assert len(serving(webhook)) == 2
    assert not {node_a, node_b} & set(serving(webhook).values())
    assert [r for r in stream.records if r.failed or r.unrewritten] == []
    assert len(stream.records) > 0
