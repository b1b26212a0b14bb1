"""A control plane of this package's own: its tests restart kube-apiserver, compact etcd and
throttle accounts with API Priority and Fairness, which the session's other tests, sharing the
session's control plane and the install on it, must never meet (a restarted apiserver is
ready before its admission plugins have lwgpu's webhook configurations and endpoints again).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import FLEET, require_binaries
from tools.cluster import controlplane, fleet
from tools.cluster.controlplane import ControlPlane


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler with the test fleet,
    for these tests alone."""
    require_binaries()
    with controlplane.running(tmp_path_factory.mktemp("faults-plane")) as plane:
        fleet.create(plane, FLEET)
        yield plane
