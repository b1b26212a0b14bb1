"""FakeInventory reads as the real NodeInventory does, which runs here on the API double.

What `Discovery` relies on (webhook/server/discovered.py): `profiles()` is one tuple of
`Profile`s, the same object until the Nodes change (the merged policies are cached on its
identity); `age_seconds()` a float; `stop()` ends the following and keeps the last snapshot
(NodeInventory.stop only joins its thread); `running()` says which.
"""

import inspect

import pytest

from tests.fakes.inventory import FakeInventory
from tests.support.builders import gpu_node
from webhook.core.nodes import profiles_from_labels
from webhook.kube.inventory import NodeInventory

BOUNDARY = ["profiles", "age_seconds", "running", "stop"]


@pytest.mark.parametrize("method", BOUNDARY)
def test_the_boundary_has_the_real_signatures(method):
    def shape(cls):
        params = inspect.signature(getattr(cls, method)).parameters.values()
        return [(p.name, p.kind, p.default) for p in params]

    assert shape(FakeInventory) == shape(NodeInventory)


# (nodes as (name, nvidia_mem, nvidia_name), what it shows)
CLUSTERS = [
    ([("a", "2048MiB", "GRID-P4-2Q"), ("b", "7611MiB", "Tesla-P4")], "two classes"),
    ([("a", "2048MiB", "GRID-P4-2Q"), ("b", "2048MiB", "Other")], "names disagree"),
    ([("cpu", None, None)], "no GPU nodes"),
]


@pytest.mark.parametrize("nodes", [c[0] for c in CLUSTERS], ids=[c[1] for c in CLUSTERS])
def test_reads_and_stop_as_node_inventory(kube, nodes):
    for name, mem, gpu in nodes:
        kube.seed(gpu_node(name, mem, gpu))
    labels = {n: gpu_node(n, m, g)["metadata"]["labels"] for n, m, g in nodes}
    real = NodeInventory(kube.core_v1(), backoff=(0.01, 0.04), watch_timeout_s=5).start()
    fake = FakeInventory(profiles_from_labels(labels))
    try:
        assert real.wait_synced(10)
        for inventory in (real, fake):
            snapshot = inventory.profiles()
            assert isinstance(snapshot, tuple)
            assert inventory.profiles() is snapshot  # no change, the same object
            assert isinstance(inventory.age_seconds(), float)
            assert 0 <= inventory.age_seconds() < 10
            assert inventory.running()
        assert fake.profiles() == real.profiles()
    finally:
        real.stop()
    for inventory in (real, fake):
        before = inventory.profiles()
        inventory.stop()  # for the real one a second stop, which must be harmless
        assert not inventory.running()
        assert inventory.profiles() is before  # the last snapshot stays
    assert fake.profiles() == real.profiles()
