"""The `cluster` fixture of the `certs install` tests (tests/certs/install_cluster.py)."""

import pytest

from tests.certs.install_cluster import Cluster


@pytest.fixture
def cluster(control_plane, namespace):
    """Three webhook configurations without caBundle, and no Secret yet."""
    made = Cluster(control_plane, namespace)
    made.create_configs()
    yield made
    made.delete_configs()
