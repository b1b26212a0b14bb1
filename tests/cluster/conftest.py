"""The cluster tests' fixtures: the real control plane, lwgpu installed in it, and a namespace
per test (tests/support/cluster.py)."""

from tests.support.cluster import control_plane, lwgpu, namespace

__all__ = ["control_plane", "lwgpu", "namespace"]
