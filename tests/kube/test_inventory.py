"""Profile discovery: Nodes' GPU labels, listed and watched on the API double, become classes."""

import logging
import math
import time

import pytest

from tests.support.builders import MEM, NAME, gpu_node
from tests.support.server import free_port
from tests.support.waiting import wait_for
from webhook.core.nodes import profiles_from_labels
from webhook.core.placement import best_fit
from webhook.kube.inventory import NodeInventory
from webhook.policy import Profile


def summary(profiles):
    """(name, MiB, selector, node labels) per profile, for comparisons."""
    return [(p.name, p.memory_mib, dict(p.node_selector), dict(p.node_labels)) for p in profiles]


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


@pytest.fixture(name="start")
def fixture_start(kube):
    """Start an inventory on the double (fast backoff); stopped after the test."""
    started = []

    def start():
        inventory = NodeInventory(kube.core_v1(), backoff=(0.01, 0.04), watch_timeout_s=5).start()
        started.append(inventory)
        assert inventory.wait_synced(10)
        return inventory

    yield start
    for inventory in started:
        inventory.stop()


def test_discovered_classes_place_a_5gib_pod_on_7611mib(kube, start):
    """2048MiB and 7611MiB nodes -> both classes; 5 GiB fits only the 7611MiB class."""
    for obj in (
        gpu_node("p4-2q", "2048MiB", "GRID-P4-2Q"),
        gpu_node("p4", "7611MiB", "Tesla-P4"),
        gpu_node("cpu"),
    ):
        kube.seed(obj)
    inventory = start()
    assert summary(inventory.profiles()) == [P4_2Q, TESLA_P4]
    assert dict(best_fit(inventory.profiles(), 5 * 1024).node_selector) == {MEM: "7611MiB"}
    assert 0 <= inventory.age_seconds() < 10
    listed = [r for r in kube.requests if r.method == "GET" and "watch" not in r.query]
    assert [r.query["labelSelector"] for r in listed] == [MEM]


def test_a_class_disappears_with_its_last_node(kube, start):
    """Deleting one of two 2048MiB nodes keeps the class; deleting the last removes it."""
    for obj in (
        gpu_node("a", "2048MiB", "GRID-P4-2Q"),
        gpu_node("b", "2048MiB", "GRID-P4-2Q"),
        gpu_node("p4", "7611MiB", "Tesla-P4"),
    ):
        kube.seed(obj)
    inventory = start()
    kube.delete("v1", "Node", "a")
    kube.delete("v1", "Node", "p4")
    # events arrive in order: once p4 is gone, a's deletion has been applied too
    assert wait_for(lambda: summary(inventory.profiles()) == [P4_2Q])
    kube.delete("v1", "Node", "b")
    assert wait_for(lambda: inventory.profiles() == ())


def test_labels_changing_on_a_live_node_are_followed(kube, start):
    """A node gaining the labels adds its class; losing them (it leaves the selector) drops it."""
    kube.seed(gpu_node("gpu", "2048MiB", "GRID-P4-2Q"))
    inventory = start()
    kube.seed(gpu_node("late", "7611MiB", "Tesla-P4"))
    assert wait_for(lambda: summary(inventory.profiles()) == [P4_2Q, TESLA_P4])
    kube.seed(gpu_node("gpu"))
    assert wait_for(lambda: summary(inventory.profiles()) == [TESLA_P4])


def test_api_down_keeps_the_last_snapshot_and_never_blocks(kube, start, caplog):
    """Outage: profiles() answers at once with the last snapshot; the change lands on recovery."""
    kube.seed(gpu_node("gpu", "2048MiB", "GRID-P4-2Q"))
    inventory = start()
    with caplog.at_level(logging.WARNING, logger="webhook.kube.inventory"):
        kube.set_down(True)
        kube.seed(gpu_node("p4", "7611MiB", "Tesla-P4"))
        assert wait_for(lambda: "503" in caplog.text)
        began = time.monotonic()
        answers = [inventory.profiles() for _ in range(1000)]
        assert time.monotonic() - began < 1.0  # a single API round trip per call would exceed this
        assert all(summary(answer) == [P4_2Q] for answer in answers)
        aged = inventory.age_seconds()
        assert wait_for(lambda: inventory.age_seconds() > aged)
        kube.set_down(False)
        assert wait_for(lambda: summary(inventory.profiles()) == [P4_2Q, TESLA_P4])


def test_expired_resource_version_relists(kube, start):
    """A watch resumed from a compacted resourceVersion gets 410 and the inventory re-lists."""
    kube.seed(gpu_node("gpu", "2048MiB", "GRID-P4-2Q"))
    inventory = start()
    kube.seed(gpu_node("cpu"))  # bumps the version without an event for this watch
    kube.set_down(True)  # cuts the open watch
    kube.compact()
    kube.seed(gpu_node("p4", "7611MiB", "Tesla-P4"))
    kube.set_down(False)
    assert wait_for(lambda: summary(inventory.profiles()) == [P4_2Q, TESLA_P4])
    lists = [r for r in kube.requests if r.method == "GET" and "watch" not in r.query]
    assert len(lists) == 2


def test_failures_back_off_exponentially(kube, start, caplog):
    """Failed lists are retried after doubling delays, capped at the maximum; the first
    failure is a warning, the same failure again a debug line, the recovery one info line."""
    kube.seed(gpu_node("gpu", "2048MiB", "GRID-P4-2Q"))
    kube.inject("GET", r"^/api/v1/nodes$", 500, times=4)
    with caplog.at_level(logging.DEBUG, logger="webhook.kube.inventory"):
        inventory = start()
    failed = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert [r.getMessage().rsplit(" ", 1)[-1] for r in failed] == [
        "0.01s",
        "0.02s",
        "0.04s",
        "0.04s",
    ]
    assert [r.levelname for r in caplog.records] == ["WARNING", *["DEBUG"] * 3, "INFO"]
    assert summary(inventory.profiles()) == [P4_2Q]


def test_a_dead_endpoint_is_one_short_warning_and_one_line_when_it_answers(kube, caplog):
    """Connection refused, retried many times: one warning naming the address and the cause,
    debug lines for the retries, none of urllib3's "Retrying" warnings; when the API server
    answers, one info line."""
    kube.seed(gpu_node("gpu", "2048MiB", "GRID-P4-2Q"))
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    core = kube.core_v1()
    core.api_client.configuration.host = dead
    inventory = NodeInventory(core, backoff=(0.01, 0.02), watch_timeout_s=5)
    with caplog.at_level(logging.DEBUG):
        inventory.start()
        try:
            wait_for(lambda: len([r for r in caplog.records if "still" in r.getMessage()]) >= 5)
            core.api_client.configuration.host = kube.url  # the API server is back
            assert inventory.wait_synced(10)
            wait_for(lambda: any(r.levelno == logging.INFO for r in caplog.records))
        finally:
            inventory.stop()
    shown = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert shown == [
        (
            "WARNING",
            f"node inventory: cannot reach the API server {dead}: connection refused; "
            "no nodes listed yet, retrying in 0.01s",
        ),
        ("INFO", f"node inventory: the API server {kube.url} answers again"),
    ]
    assert not [r for r in caplog.records if r.getMessage().startswith("Retrying")]
    assert summary(inventory.profiles()) == [P4_2Q]


def test_stop_ends_the_thread_with_a_watch_open(kube, start):
    """stop() cuts the open watch and the background thread ends."""
    inventory = start()
    assert math.isfinite(inventory.age_seconds()) and inventory.running()
    inventory.stop()
    assert not inventory.running()


def test_age_is_infinite_before_the_first_list(kube):
    """Never synced: the age says so (the metric shows +Inf)."""
    inventory = NodeInventory(kube.core_v1())
    assert inventory.age_seconds() == math.inf and inventory.profiles() == ()
