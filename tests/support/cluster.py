"""The real control plane the cluster tests run against (tools/cluster/): one per test session,
with the fleet of tests/data/nodes/mixed-fleet.yaml, and lwgpu installed from the checkout as
`kubectl apply -k deploy/` installs it.

Where the binaries are not built, the tests that need them are skipped with one line saying how
to build them; under `CI=true` that is a failure instead, since CI builds them first.
Each test that creates objects takes a `namespace` of its own; at its end the namespace is
deleted and its pods removed at once (no kubelet is there to confirm a graceful deletion),
so the GPUs they were bound to are free for the next test.

Every test that reaches `control_plane`, directly or through another fixture, is marked
`cluster` at collection, so `pytest -m "not cluster"` (`make test-fast`) runs exactly the tests
that start no control plane.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.paths import DATA
from tools.cluster import binaries, controlplane, fleet, install
from tools.cluster.controlplane import ControlPlane
from tools.cluster.install import Installation
from webhook.api.types import KubeObject

FLEET = DATA / "nodes" / "mixed-fleet.yaml"
_numbers = itertools.count(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `cluster` each test whose fixtures, followed to the end, include `control_plane`."""
    for item in items:
        if "control_plane" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


def require_binaries() -> None:
    """Skip (fail under CI=true) when the control plane is not built."""
    if absent := binaries.missing():
        reason = (
            f"no Kubernetes control plane: {', '.join(absent)} not built; {binaries.HOW_TO_BUILD}"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler with the test fleet."""
    require_binaries()
    with controlplane.running(tmp_path_factory.mktemp("control-plane")) as plane:
        fleet.create(plane, FLEET)
        yield plane


@pytest.fixture(scope="session")
def lwgpu(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    """lwgpu installed from deploy/, its webhook reached through its Service."""
    with install.installed(control_plane, tmp_path_factory.mktemp("pods")) as installation:
        yield installation


@dataclass(frozen=True)
class Namespace:
    """A namespace of one test's own, and the control plane it lives in."""

    name: str
    plane: ControlPlane

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """kubectl in this namespace."""
        return self.plane.kubectl("-n", self.name, *args, input=input, check=check)

    def get(self, kind: str, name: str) -> KubeObject:
        """One stored object as JSON."""
        stored: KubeObject = json.loads(self.kubectl("get", kind, name, "-o", "json").stdout)
        return stored


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[Namespace]:
    """A fresh namespace, removed with its pods at the end of the test."""
    name = f"t{next(_numbers)}-{os.getpid()}"
    control_plane.kubectl("create", "namespace", name)
    yield Namespace(name, control_plane)
    control_plane.kubectl("delete", "namespace", name, "--wait=false")
    control_plane.kubectl(
        "delete", "pods", "--all", "-n", name, "--force", "--grace-period=0", check=False
    )
