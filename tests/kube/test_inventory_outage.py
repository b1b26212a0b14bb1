"""The node inventory through a real kube-apiserver restart (tests/support/cluster.py): while
the apiserver is away the last snapshot is answered at once; when it is back, the watch resumes
from a resourceVersion older than the new apiserver's watch cache, gets 410 Gone, and the
inventory lists again.

The restart is the session's own apiserver: `restart_apiserver` returns once it is ready
again, within the test, so the tests after this one find it as they expect.
"""

import logging
import threading
import time

from kubernetes import client

from tests.support.builders import MEM, NAME
from tools.waiting import wait_for
from webhook.kube.inventory import NodeInventory

LOG = "webhook.kube.inventory"
BEFORE, AFTER = "5120MiB", "5632MiB"


def classes(inventory) -> list[str]:
    """The test's own classes (by nvidia_mem) in the inventory's snapshot."""
    mems = [p.node_selector[MEM] for p in inventory.profiles()]
    return [m for m in mems if m in (BEFORE, AFTER)]


def test_a_restart_keeps_the_snapshot_then_the_expired_watch_relists(
    control_plane, own_nodes, kube_requests, caplog
):
    """kube-apiserver stops listening at SIGTERM; the open watch breaks when the process ends.
    The new apiserver's watch cache starts at the revision it listed, so the watch resumed
    from the old resourceVersion is refused with 410 Gone (`getAllEventsSinceLocked` in
    staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go: "too old resource
    version"), and the inventory lists again and follows the Nodes from there."""
    own_nodes.create("before", {MEM: BEFORE, NAME: "Outage-5G"})
    core = client.CoreV1Api(kube_requests.follow(control_plane.api()))
    # Watches of 2 s: once one has run its term the inventory resumes from its resourceVersion
    # (a watch cut in the middle, before any had ended, lists again instead).
    inventory = NodeInventory(core, backoff=(0.1, 1.0), watch_timeout_s=2).start()
    try:
        assert inventory.wait_synced(60) and classes(inventory) == [BEFORE]
        wait_for(lambda: sum(r.watch for r in kube_requests.sent) >= 2, timeout=60)
        snapshot = inventory.profiles()
        with caplog.at_level(logging.INFO, logger=LOG):
            # Only the stop runs aside (it waits out the apiserver's grace period); the start
            # is this thread's: components start with PR_SET_PDEATHSIG, which fires when the
            # thread that started them ends.
            stopping = threading.Thread(target=control_plane.stop, args=("kube-apiserver",))
            stopping.start()
            try:
                wait_for(
                    lambda: "cannot reach the API server" in caplog.text,
                    timeout=60,
                    what="the inventory to notice the outage",
                )
                aged = inventory.age_seconds()
                began = time.monotonic()
                answers = [inventory.profiles() for _ in range(1000)]
                # a single API round trip per call would exceed this
                assert time.monotonic() - began < 1.0
                assert all(answer is snapshot for answer in answers)
                assert wait_for(lambda: inventory.age_seconds() > aged)
            finally:
                stopping.join(60)
                control_plane.restart_apiserver()  # already stopped: starts it and awaits /readyz
            own_nodes.create("after", {MEM: AFTER, NAME: "Outage-5_5G"})
            assert wait_for(lambda: classes(inventory) == [BEFORE, AFTER], timeout=60)
    finally:
        inventory.stop()
    assert "node inventory: watch expired (410), re-listing nodes" in caplog.text
    assert "answers again" in caplog.text
    assert len(kube_requests.lists()) >= 2
