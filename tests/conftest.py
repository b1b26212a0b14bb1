"""Fixtures shared by the whole suite: the Kubernetes API double and one real server per module.

`kube` is a running `KubeAPIDouble` (tests/fakes/kubeapi.py), empty, per test; a module that
needs it seeded or reached through kubeconfig overrides `kube` with a fixture of the same name
that asks for this one. `server` is the real `webhook serve` (gunicorn, 2 workers, real TLS on
a free loopback port) with the shipped policy, started once per module that asks for it and
stopped with SIGTERM after its last test; a module changes how it starts by overriding
`server_options`, whose dict goes to `tests.support.server.serving` (`tls_dir`, `extra_args`,
`workers`, ..., and `policies` for another policy file).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.kubeapi import KubeAPIDouble
from tests.support.paths import SHIPPED_POLICY
from tests.support.server import Server, serving


@pytest.fixture
def kube() -> Iterator[KubeAPIDouble]:
    """A running, empty Kubernetes API double."""
    with KubeAPIDouble() as double:
        yield double


@pytest.fixture(scope="module")
def server_options() -> dict:
    """How `server` starts, beyond a fresh work folder: here the shipped policy and defaults."""
    return {}


@pytest.fixture(scope="module")
def server(tmp_path_factory, server_options) -> Iterator[Server]:
    """The real server for this module's tests, started as `server_options` says."""
    options = dict(server_options)
    policies = options.pop("policies", SHIPPED_POLICY)
    with serving(tmp_path_factory.mktemp("server"), policies, **options) as running:
        yield running
