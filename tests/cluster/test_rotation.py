"""Certificate rotation and policy reload under a stream of creates through the real
kube-apiserver, which verifies every replica's certificate against `lwgpu-mutate`'s caBundle:
`certs install` rolling the CA, a cert-manager style key swap and a policy ConfigMap update,
each reaching the running replicas by kubelet's AtomicWriter (the stand-in kubelet's remount,
tools/cluster/pod_lifecycle.py). The same scenarios, longer and at higher rates, are `python
-m tools.reliability.rotation` (docs/RELIABILITY.md). Counts only, never timings.

They replace the cluster's certificates and policy, so they run on a control plane of their
own (`webhook_cluster.cluster`), not on the session's `lwgpu`.
"""

from __future__ import annotations

import pytest

from tests.support.cluster import require_binaries
from tools.reliability import rotation
from tools.reliability.replicas import served
from tools.reliability.webhook_cluster import cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory):
    """A control plane with lwgpu installed and its webhook pods followed."""
    require_binaries()
    with cluster(tmp_path_factory.mktemp("rotation")) as c:
        yield c


def test_certs_install_rolls_the_ca_under_creates_and_fails_none(webhook):
    before = {pod.address: served(pod.address) for pod in webhook.installation.webhook}

    row = rotation.CHANGES["rotate-ca"].run(webhook, rate=10, seconds=20)

    assert row["creates"] >= 150
    assert (row["failed"], row["unrewritten"]) == (0, 0), row["errors"]
    # A new CA, first in the caBundle, the old ones kept (the set-up's aged CA and the
    # install's first); every replica serves a certificate it had not served before.
    assert (row["ca_rolled"], row["new_ca_first"]) == (True, True)
    assert row["bundle_cas"] >= 2
    assert all(served(address) != der for address, der in before.items())
    assert webhook.pods.errors == []


def test_a_key_swap_from_the_same_ca_under_creates_fails_none(webhook):
    before = {pod.address: served(pod.address) for pod in webhook.installation.webhook}

    row = rotation.CHANGES["swap-key"].run(webhook, rate=10, seconds=20)

    assert row["creates"] >= 150
    assert (row["failed"], row["unrewritten"]) == (0, 0), row["errors"]
    assert all(served(address) != der for address, der in before.items())


def test_every_create_after_a_policy_reload_is_decided_by_the_new_policy(webhook):
    row = rotation.CHANGES["policy"].run(webhook, rate=10, seconds=20)

    assert (row["failed"], row["unrewritten"]) == (0, 0), row["errors"]
    # The stream sees the change: 4096MiB before it (no GRID-P4-2Q), 2048MiB after.
    assert row["before_change"] >= 40 and row["new_class_before_change"] == 0
    assert row["after_reload"] >= 50
    assert row["decided_by_old_policy_after_reload"] == 0
