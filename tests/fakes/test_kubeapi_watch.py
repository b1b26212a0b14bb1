"""The Kubernetes API double's watches and faults, through the real `kubernetes` client: resuming
from a resourceVersion, timeouts, selectors, live events, 410 after compaction, injected failures
and outages that cut open watches.
"""

import json
import threading

import pytest
import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from tests.support.builders import node


def events(kube, count, **kwargs):
    """The first `count` events of a watch on nodes as (type, name) pairs."""
    seen, w = [], watch.Watch()
    for ev in w.stream(kube.core_v1().list_node, timeout_seconds=5, **kwargs):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == count:
            w.stop()
    return seen


def test_watch_resumes_after_a_resource_version(kube):
    """Events after the given resourceVersion replay in order."""
    start = kube.core_v1().list_node().metadata.resource_version
    kube.seed(node("a"))
    kube.seed(node("a", pool="gpu"))
    kube.delete("v1", "Node", "a")
    assert events(kube, 3, resource_version=start) == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    assert kube.requests[-1].query["watch"] == "true"


def test_watch_ends_at_timeout_seconds(kube):
    """The apiserver closes a quiet watch when timeoutSeconds runs out."""
    stream = watch.Watch().stream(kube.core_v1().list_node, resource_version="5", timeout_seconds=1)
    assert list(stream) == []
    assert kube.requests[-1].query["timeoutSeconds"] == "1"


def test_watch_without_version_starts_with_the_current_state(kube):
    """No resourceVersion: synthetic ADDED events for what exists now."""
    kube.seed(node("a"))
    kube.seed(node("b"))
    assert events(kube, 2) == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_with_selector_sees_objects_enter_and_leave(kube):
    """A label change out of the selector reads as DELETED, into it as ADDED."""
    start = kube.seed(node("a"))["metadata"]["resourceVersion"]
    kube.seed(node("a", pool="gpu"))
    kube.seed(node("a"))
    assert events(kube, 2, resource_version=start, label_selector="pool=gpu") == [
        ("ADDED", "a"),
        ("DELETED", "a"),
    ]


def test_live_watch_delivers_later_changes(kube):
    """A change made while a watch is open arrives on it."""
    start = kube.core_v1().list_node().metadata.resource_version
    seen, w = [], watch.Watch()

    def consume():
        for ev in w.stream(kube.core_v1().list_node, resource_version=start, timeout_seconds=10):
            seen.append(ev["object"].metadata.name)
            w.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    kube.seed(node("late"))
    thread.join(10)
    assert seen == ["late"]


def test_watch_from_a_compacted_version_is_410_gone(kube):
    """A too-old resourceVersion is an ERROR event the client raises as 410."""
    start = kube.core_v1().list_node().metadata.resource_version
    kube.seed(node("a"))
    kube.compact()
    with pytest.raises(ApiException) as err:
        events(kube, 1, resource_version=start)
    assert err.value.status == 410


def test_injected_failures_answer_a_status_then_clear(kube):
    """inject() fails exactly the next N matching requests."""
    kube.seed(node("a"))
    kube.inject("GET", r"^/api/v1/nodes/a$", 500, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            kube.core_v1().read_node("a")
        assert (err.value.status, json.loads(err.value.body)["reason"]) == (500, "InternalError")
    assert kube.core_v1().read_node("a").metadata.name == "a"


def test_outage_answers_503_cuts_watches_and_recovers(kube):
    """set_down(True): requests fail with 503 and an open watch breaks; set_down(False) heals."""
    start = kube.core_v1().list_node().metadata.resource_version
    errors, w = [], watch.Watch()

    def consume():
        try:
            for _ in w.stream(kube.core_v1().list_node, resource_version=start, timeout_seconds=10):
                pass
        except (ApiException, urllib3.exceptions.HTTPError) as err:
            errors.append(err)

    thread = threading.Thread(target=consume)
    thread.start()
    kube.set_down(True)
    thread.join(10)
    assert errors and not thread.is_alive()
    with pytest.raises(ApiException) as err:
        kube.core_v1().list_node()
    assert err.value.status == 503
    kube.set_down(False)
    assert kube.core_v1().list_node().items == []
