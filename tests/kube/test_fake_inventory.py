"""FakeInventory (tests/fakes/inventory.py) reads as the real NodeInventory does, here on the
real kube-apiserver of the session with its fleet and Nodes of the test's own.

What `Discovery` relies on (webhook/server/state/discovery.py): `profiles()` is one tuple
of `Profile`s, the same object until the Nodes change (the merged policies are cached on its
identity); `age_seconds()` a float; `stop()` ends the following and keeps the last snapshot;
`running()` says which. tests/server/test_discovery.py uses the double for Discovery's own
logic, where a snapshot must change on demand and the age must be exact.
"""

import inspect

import pytest
from kubernetes import client

from tests.fakes.inventory import FakeInventory
from tests.support.builders import MEM, NAME
from webhook.kube.inventory import NodeInventory
from webhook.scheduling import profiles_from_labels

BOUNDARY = ["profiles", "age_seconds", "running", "stop"]


@pytest.mark.parametrize("method", BOUNDARY)
def test_the_boundary_has_the_real_signatures(method):
    def shape(cls):
        params = inspect.signature(getattr(cls, method)).parameters.values()
        return [(p.name, p.kind, p.default) for p in params]

    assert shape(FakeInventory) == shape(NodeInventory)


# (the test's own nodes as (hint, nvidia_mem, nvidia_name), what they add to the fleet)
CLUSTERS = [
    ([("a", "2304MiB", "Fake-2_25G"), ("b", "7424MiB", "Fake-7_25G")], "two classes"),
    ([("a", "2304MiB", "Fake-2_25G"), ("b", "2304MiB", "Other")], "names disagree"),
    ([("cpu", None, None)], "no GPU nodes"),
]


@pytest.mark.parametrize("nodes", [c[0] for c in CLUSTERS], ids=[c[1] for c in CLUSTERS])
def test_reads_and_stop_as_node_inventory(control_plane, own_nodes, nodes):
    for hint, mem, gpu in nodes:
        own_nodes.create(hint, {MEM: mem, NAME: gpu} if mem else {"kubernetes.io/os": "linux"})
    core = client.CoreV1Api(control_plane.api())
    real = NodeInventory(core, backoff=(0.01, 0.04), watch_timeout_s=5).start()
    listed = core.list_node(label_selector=MEM).items
    fake = FakeInventory(profiles_from_labels({n.metadata.name: n.metadata.labels for n in listed}))
    try:
        assert real.wait_synced(60)
        for inventory in (real, fake):
            snapshot = inventory.profiles()
            assert isinstance(snapshot, tuple)
            assert inventory.profiles() is snapshot  # no change, the same object
            assert isinstance(inventory.age_seconds(), float)
            assert 0 <= inventory.age_seconds() < 60
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
