"""Profile discovery: Nodes' GPU labels, the cloud's and GPU Feature Discovery's, listed and
watched on the real kube-apiserver of the session (tests/support/cluster.py), become classes.

The fleet's Nodes are there from the start (tests/data/nodes/mixed-fleet.yaml); each test adds
Nodes of its own, with GPU memory values no other test uses, and deletes them at its end.
What the apiserver does to the inventory's watch when it restarts is in
test_inventory_outage.py.
"""

import logging
import math

import pytest
from kubernetes import client

from tests.support.builders import MEM, NAME
from tests.support.paths import DATA
from tools.loopback.server import free_port
from tools.waiting import wait_for
from webhook.core.placement import best_fit
from webhook.kube.client import api_client
from webhook.kube.inventory import FORBIDDEN_FIX, NodeInventory
from webhook.offline.cluster import read_nodes
from webhook.policy import Profile
from webhook.scheduling import profiles_from_labels

LOG = "webhook.kube.inventory"
GFD_MEM, PRODUCT = "nvidia.com/gpu.memory", "nvidia.com/gpu.product"
# The Node grant, an option of the install (the base has none).
DISCOVERY = "../components/discovery/discovery.yaml"


def summary(profiles):
    """(name, MiB, selector, node labels) per profile, for comparisons."""
    return [(p.name, p.memory_mib, dict(p.node_selector), dict(p.node_labels)) for p in profiles]


def gpu(mem: str | None = None, name: str | None = None) -> dict[str, str]:
    """A Linux node's labels, with the GPU labels the platform (or `label-node`) sets."""
    return (
        {"kubernetes.io/os": "linux"} | ({MEM: mem} if mem else {}) | ({NAME: name} if name else {})
    )


def only(profiles, *mems: str):
    """The summary of the classes whose nvidia_mem is one of `mems` (the test's own)."""
    return [s for s in summary(profiles) if s[2][MEM] in mems]


# A class whose nodes agree on nvidia_name lists it, so a pod pinning the name is understood.
P4_2Q = ("GRID-P4-2Q", 2048, {MEM: "2048MiB"}, {NAME: "GRID-P4-2Q"})
TESLA_P4 = ("Tesla-P4", 7611, {MEM: "7611MiB"}, {NAME: "Tesla-P4"})


@pytest.mark.parametrize(
    "labels,expected",
    [
        (
            {"a": {MEM: "7611MiB", NAME: "Tesla-P4"}, "b": {MEM: "2048MiB", NAME: "GRID-P4-2Q"}},
            [P4_2Q, TESLA_P4],
        ),
        (
            {"a": {MEM: "2048MiB", NAME: "GRID-P4-2Q"}, "b": {MEM: "2048MiB", NAME: "Other-2G"}},
            [("2048MiB", 2048, {MEM: "2048MiB"}, {})],
        ),
        ({"a": {MEM: "4096MiB"}}, [("4096MiB", 4096, {MEM: "4096MiB"}, {})]),
        ({"a": {MEM: "4Gi", NAME: "x"}, "b": {MEM: "MiB"}, "c": {NAME: "y"}}, []),
        ({}, []),
    ],
    ids=["two-classes", "names-disagree", "no-name", "malformed", "none"],
)
def test_profiles_from_labels(labels, expected):
    """One class per nvidia_mem value, named after nvidia_name when the nodes agree."""
    found = profiles_from_labels(labels)
    assert summary(found) == expected
    assert all(isinstance(p, Profile) for p in found)


def cluster_profiles(plane):
    """The classes of every GPU-labelled Node the admin lists now."""
    nodes = [
        node
        for key in (MEM, GFD_MEM)
        for node in client.CoreV1Api(plane.api()).list_node(label_selector=key).items
    ]
    return profiles_from_labels({n.metadata.name: n.metadata.labels for n in nodes})


@pytest.fixture(name="start")
def fixture_start(control_plane, kube_requests):
    """Start an inventory as the admin (fast backoff), its requests recorded; stopped after
    the test."""
    started = []

    def start(core=None, synced=True, **options):
        core = core or client.CoreV1Api(kube_requests.follow(control_plane.api()))
        options = {"backoff": (0.01, 0.04), "watch_timeout_s": 5} | options
        inventory = NodeInventory(core, **options).start()
        started.append(inventory)
        if synced:
            assert inventory.wait_synced(60)
        return inventory

    yield start
    for inventory in started:
        inventory.stop()


def test_the_first_list_sees_the_fleet_and_new_nodes(
    control_plane, own_nodes, start, kube_requests
):
    """The fleet's classes and ours (2048MiB joins the fleet's GRID-P4-2Q, 7611MiB is new): a
    5 GiB pod then fits best on 7611MiB, below the fleet's 8192MiB."""
    own_nodes.create("p4-2q", gpu("2048MiB", "GRID-P4-2Q"))
    own_nodes.create("p4", gpu("7611MiB", "Tesla-P4"))
    own_nodes.create("cpu", gpu())
    inventory = start()
    assert summary(inventory.profiles()) == summary(cluster_profiles(control_plane))
    assert P4_2Q in summary(inventory.profiles()) and TESLA_P4 in summary(inventory.profiles())
    assert dict(best_fit(inventory.profiles(), 5 * 1024).node_selector) == {MEM: "7611MiB"}
    assert 0 <= inventory.age_seconds() < 60
    # one list per memory label: a label selector cannot ask for one key or the other
    assert sorted(r.query["labelSelector"] for r in kube_requests.lists()) == [[MEM], [GFD_MEM]]


def test_gpu_feature_discovery_nodes_become_classes(own_nodes, start):
    """Nodes GFD labels (tests/data/nodes/gfd-vgpu-fleet.yaml's, with no cloud label) become
    the classes of their vGPUs, the time-sliced T4 and the 4-GPU node none; a node the cloud
    labels too is one node: it joins the GFD class of its memory, whose label it carries."""
    fleet = read_nodes(str(DATA / "nodes" / "gfd-vgpu-fleet.yaml"))
    for name, node in fleet.items():
        # The fleet's memory values shifted by 7 MiB, so no other test's node shares them.
        labels = dict(node.labels)
        if GFD_MEM in labels:
            labels[GFD_MEM] = str(int(labels[GFD_MEM]) + 7)
        own_nodes.create(name, labels)
    inventory = start()
    gfd = [s for s in summary(inventory.profiles()) if GFD_MEM in s[2]]
    assert gfd == [
        (f"GRID-T4-{g}Q", g * 1024 + 7, {GFD_MEM: str(g * 1024 + 7)}, {PRODUCT: f"GRID-T4-{g}Q"})
        for g in (2, 4, 8)
    ]
    both = {**fleet["vgpu-t4-4q-1"].labels, GFD_MEM: "4103", MEM: "4103MiB", NAME: "GRID-T4-4Q"}
    own_nodes.create("both", both)
    four = ("GRID-T4-4Q", 4103, {GFD_MEM: "4103"}, {PRODUCT: "GRID-T4-4Q"})
    assert wait_for(
        lambda: summary(inventory.profiles()) == summary(cluster_profiles(own_nodes.plane))
    )
    assert four in summary(inventory.profiles())
    assert not [s for s in summary(inventory.profiles()) if s[1] == 4103 and s != four]


def test_a_class_disappears_with_its_last_node(own_nodes, start):
    """Deleting one of two 3072MiB nodes keeps the class; deleting the last removes it."""
    a = own_nodes.create("a", gpu("3072MiB", "Test-3G"))
    b = own_nodes.create("b", gpu("3072MiB", "Test-3G"))
    c = own_nodes.create("c", gpu("6144MiB", "Test-6G"))
    inventory = start()
    assert [s[0] for s in only(inventory.profiles(), "3072MiB", "6144MiB")] == [
        "Test-3G",
        "Test-6G",
    ]
    own_nodes.delete(a)
    own_nodes.delete(c)
    # events arrive in order: once c is gone, a's deletion has been applied too
    assert wait_for(
        lambda: [s[0] for s in only(inventory.profiles(), "3072MiB", "6144MiB")] == ["Test-3G"]
    )
    own_nodes.delete(b)
    assert wait_for(lambda: only(inventory.profiles(), "3072MiB", "6144MiB") == [])


def test_labels_changing_on_a_live_node_are_followed(own_nodes, start):
    """A node gaining the labels adds its class, a new value moves it; losing them drops it:
    the Node leaves the watch's label selector and the apiserver sends DELETED
    (`convertToWatchEvent` in staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go:
    the old object passed the filter, the new one does not)."""
    mems = ("2560MiB", "7168MiB", "7200MiB")
    gpu_node = own_nodes.create("gpu", gpu("2560MiB", "Test-2_5G"))
    late = own_nodes.create("late", gpu())
    inventory = start()
    assert [s[1] for s in only(inventory.profiles(), *mems)] == [2560]
    own_nodes.relabel(late, {MEM: "7168MiB", NAME: "Test-7G"})
    assert wait_for(lambda: [s[1] for s in only(inventory.profiles(), *mems)] == [2560, 7168])
    own_nodes.relabel(late, {MEM: "7200MiB"})
    assert wait_for(lambda: [s[1] for s in only(inventory.profiles(), *mems)] == [2560, 7200])
    own_nodes.relabel(gpu_node, {MEM: None, NAME: None})
    assert wait_for(lambda: [s[1] for s in only(inventory.profiles(), *mems)] == [7200])


def test_etcd_compaction_does_not_expire_a_watch_the_watch_cache_serves(
    control_plane, own_nodes, start, kube_requests, caplog
):
    """etcd forgets the history below the compacted revision, but kube-apiserver serves watches
    from its watch cache, which keeps its own window of events since it listed
    (`getAllEventsSinceLocked` in staging/src/k8s.io/apiserver/pkg/storage/cacher/
    watch_cache.go answers 410 only below that window). The inventory re-watches from a
    resourceVersion etcd no longer has, is answered, and never lists again."""
    own_nodes.create("before", gpu("3584MiB", "Test-3_5G"))
    with caplog.at_level(logging.INFO, logger=LOG):
        inventory = start(watch_timeout_s=1)  # every second a new watch from its last version
        # a Node outside the selector: a newer revision, no event, so the watch keeps its own
        own_nodes.create("elsewhere", gpu())
        revision = control_plane.compact_etcd()
        compacted = len(kube_requests.sent)

        def rewatched_from_compacted() -> bool:
            return any(
                r.watch and int(r.query["resourceVersion"][0]) < revision
                for r in kube_requests.sent[compacted:]
            )

        assert wait_for(
            rewatched_from_compacted, timeout=60, what="a watch from below the compaction"
        )
        own_nodes.create("after", gpu("3840MiB", "Test-3_75G"))
        assert wait_for(lambda: len(only(inventory.profiles(), "3584MiB", "3840MiB")) == 2)
    assert len(kube_requests.lists()) == 2  # one per memory label, never again
    assert "watch expired" not in caplog.text


def retry_delays(records) -> list[str]:
    """The delay each failure line announces ("... retrying in 0.05s")."""
    return [r.getMessage().rsplit(" ", 1)[-1] for r in records if "retrying in" in r.getMessage()]


def test_forbidden_is_an_error_naming_the_permission_until_rbac_allows(
    control_plane, service_accounts, start, caplog
):
    """As a ServiceAccount without RBAC the list is a real 403: an install without the Node
    grant. Retried after doubling delays, capped; an error that quotes the apiserver's refusal
    (user, verb, resource) and names the fix, said again after `remind_s`, debug lines between.
    Once the shipped lwgpu-discovery ClusterRole is bound, one info line, and the classes."""
    kubeconfig = service_accounts.create("webhook")
    core = client.CoreV1Api(api_client(str(kubeconfig)))
    host = core.api_client.configuration.host
    with caplog.at_level(logging.DEBUG, logger=LOG):
        inventory = start(core, synced=False, backoff=(0.05, 0.2), remind_s=0.5)
        wait_for(
            lambda: len([r for r in caplog.records if r.levelno == logging.ERROR]) >= 2,
            timeout=60,
            what="the refusal said twice",
        )
        service_accounts.grant("webhook", DISCOVERY, "lwgpu-discovery")
        assert inventory.wait_synced(60)
        wait_for(lambda: any(r.levelno == logging.INFO for r in caplog.records), timeout=60)
    records = [r for r in caplog.records if r.name == LOG]
    for thread in {r.threadName for r in records if "retrying in" in r.getMessage()}:
        # each memory label's thread backs off on its own
        delays = retry_delays(r for r in records if r.threadName == thread)
        assert delays == [f"{min(0.05 * 2**i, 0.2):.2f}s" for i in range(len(delays))]
    levels = [r.levelname for r in records]
    assert levels[0] == "ERROR" and levels[-1] == "INFO"
    assert set(levels[1:-1]) == {"ERROR", "DEBUG"}
    refused = (
        f"node inventory: API server {host} answered 403 Forbidden: nodes is forbidden: User"
        f' "system:serviceaccount:{service_accounts.namespace}:webhook" cannot list resource'
        f' "nodes" in API group "" at the cluster scope; {FORBIDDEN_FIX}; no nodes listed yet,'
        " retrying in "
    )
    errors = [r.getMessage() for r in records if r.levelno == logging.ERROR]
    assert errors[0] == refused + "0.05s"
    assert all(e.startswith(refused) for e in errors)
    assert "deploy/overlays/discovery" in FORBIDDEN_FIX and "discovery.enabled" in FORBIDDEN_FIX
    assert summary(inventory.profiles()) == summary(cluster_profiles(control_plane))


class ComesBack(logging.Filter):
    """Points the inventory's client at `server` when it logs its `after`-th "still" line:
    in its own thread, between two attempts, so no attempt in flight is reported under the
    new address."""

    def __init__(self, configuration, server: str, after: int):
        super().__init__()
        self.configuration, self.server, self.left = configuration, server, after

    def filter(self, record: logging.LogRecord) -> bool:
        if "still" in record.getMessage():
            self.left -= 1
            if self.left == 0:
                self.configuration.host = self.server
        return True


def test_a_dead_endpoint_is_one_short_warning_and_one_line_when_it_answers(control_plane, caplog):
    """Connection refused, retried many times: one warning naming the address and the cause,
    debug lines for the retries, none of urllib3's "Retrying" warnings; when the API server
    answers, one info line."""
    dead = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    core = client.CoreV1Api(control_plane.api())
    core.api_client.configuration.host = dead
    back = ComesBack(core.api_client.configuration, control_plane.server, after=5)
    logging.getLogger(LOG).addFilter(back)
    inventory = NodeInventory(core, backoff=(0.01, 0.02), watch_timeout_s=5)
    with caplog.at_level(logging.DEBUG):
        inventory.start()
        try:
            assert inventory.wait_synced(60)
            wait_for(lambda: any(r.levelno == logging.INFO for r in caplog.records), timeout=60)
        finally:
            inventory.stop()
            logging.getLogger(LOG).removeFilter(back)
    shown = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert shown == [
        (
            "WARNING",
            f"node inventory: cannot reach the API server {dead}: connection refused; "
            "no nodes listed yet, retrying in 0.01s",
        ),
        ("INFO", f"node inventory: the API server {control_plane.server} answers again"),
    ]
    assert not [r for r in caplog.records if r.getMessage().startswith("Retrying")]
    assert summary(inventory.profiles()) == summary(cluster_profiles(control_plane))


def test_stop_ends_the_thread_with_a_watch_open(start, kube_requests):
    """stop() cuts the open watch and the background thread ends."""
    inventory = start(watch_timeout_s=300)
    assert wait_for(lambda: any(r.watch for r in kube_requests.sent))
    assert math.isfinite(inventory.age_seconds()) and inventory.running()
    inventory.stop()
    assert not inventory.running()


def test_age_is_infinite_before_the_first_list(control_plane):
    """Never synced: the age says so (the metric shows +Inf)."""
    inventory = NodeInventory(client.CoreV1Api(control_plane.api()))
    assert inventory.age_seconds() == math.inf and inventory.profiles() == ()
