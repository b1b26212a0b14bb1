"""The real control plane of the session and a namespace per test (tests/support/cluster.py),
for the tests here that run lwgpu's own Kubernetes clients against kube-apiserver."""

from tests.support.cluster import control_plane, namespace

__all__ = ["control_plane", "namespace"]
