"""Profiles discovered from Nodes, merged into the worker's policies (``discoverProfiles: true``).

When a loaded ``PolicySet`` asks for discovery, the worker starts a
``webhook.kube.inventory.NodeInventory`` (list + watch of Nodes in a daemon thread). Reviews
never wait on it: they read its last snapshot, and the merged ``PolicySet`` is rebuilt only
when the policy or the snapshot tuple changes (two identity checks otherwise). An API server
that cannot be reached leaves the last snapshot, or the static profiles, in use.

The Kubernetes client is imported only when a policy asks for discovery: it costs ~50 MiB
of RSS in every process that imports it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from webhook.policy import PolicySet, Profile

log = logging.getLogger(__name__)

GAUGE_INTERVAL = 1.0


def build_inventory() -> Any:
    """A started ``NodeInventory`` on a CoreV1Api from the in-cluster account, else kubeconfig."""
    from webhook.kube.client import core_api
    from webhook.kube.inventory import NodeInventory

    return NodeInventory(core_api()).start()


class Discovery:
    """One worker's node inventory, started when a policy asks for it, and the merged policies.

    ``report(age_seconds, classes)`` is called about once a second while the inventory runs
    (the worker's metrics); ``factory`` builds and starts the inventory.
    """

    def __init__(
        self,
        report: Callable[[float, int], None] | None = None,
        factory: Callable[[], Any] = build_inventory,
    ) -> None:
        """Nothing starts until ``follow`` sees a policy set that discovers."""
        self._report = report
        self._factory = factory
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.inventory: Any = None
        # (policy set, snapshot, merged): rebuilt when either of the first two is another object.
        self._cached: tuple[PolicySet, tuple[Profile, ...], PolicySet] | None = None

    def follow(self, policies: PolicySet | None) -> None:
        """Start the inventory the first time ``policies`` discovers (runs in the policy poller).

        A client that cannot be built (no in-cluster account, no kubeconfig) is logged and
        tried again at the next policy load; the static profiles serve meanwhile.
        """
        if policies is None or not policies.discovers():
            return
        with self._lock:
            if self.inventory is not None:
                return
            try:
                self.inventory = self._factory()
            except Exception as exc:
                log.error("profile discovery off, serving static profiles: %s", exc)
                return
        log.info("profile discovery on: watching Nodes' GPU labels")
        if self._report is not None:
            threading.Thread(
                target=self._gauges, args=(self._report,), name="discovery-gauges", daemon=True
            ).start()

    def merged(self, policies: PolicySet) -> PolicySet:
        """``policies`` with the inventory's current classes; never blocks, never calls the API."""
        inventory = self.inventory
        snapshot = () if inventory is None else inventory.profiles()
        cached = self._cached
        if cached is not None and cached[0] is policies and cached[1] is snapshot:
            return cached[2]
        merged = policies.with_discovered(snapshot)
        self._cached = (policies, snapshot, merged)
        return merged

    def stop(self) -> None:
        """Stop the inventory and the gauge thread."""
        self._stop.set()
        if self.inventory is not None:
            self.inventory.stop()

    def _gauges(self, report: Callable[[float, int], None]) -> None:
        # The age grows between events, so it is set on a clock, not when /metrics is read:
        # a scrape reaches one worker, and the other's value must not stand still.
        while True:
            report(self.inventory.age_seconds(), len(self.inventory.profiles()))
            if self._stop.wait(GAUGE_INTERVAL):
                return
