"""Discover which lightweight GPU classes exist from the Nodes' `aliyun.accelerator/*` labels.

`NodeInventory` lists and then watches Nodes in a background daemon thread and keeps the
classes as a snapshot of `Profile`s. Reviews only ever read that snapshot: the watch never
runs in the request path, and an unreachable API server leaves the last snapshot in place
(its age is what `/metrics` shows).
"""

from __future__ import annotations

import logging
import math
import threading
import time

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from webhook.api.names import MEM_LABEL
from webhook.core.nodes import profiles_from_labels
from webhook.policy import Profile

LOG = logging.getLogger(__name__)


class NodeInventory:
    """The lightweight GPU classes present in the cluster, kept fresh by list+watch.

    `core` is a CoreV1Api; the caller builds it (in-cluster or kubeconfig) and only GET, LIST
    and WATCH on nodes are used. `backoff` is (first, max) seconds between failed attempts;
    `watch_timeout_s` bounds one watch request, after which it resumes from its resourceVersion.
    """

    def __init__(
        self,
        core: client.CoreV1Api,
        backoff: tuple[float, float] = (0.5, 30.0),
        watch_timeout_s: int = 300,
    ):
        self._core, self._backoff, self._watch_timeout_s = core, backoff, watch_timeout_s
        self._profiles: tuple[Profile, ...] = ()
        self._labels: dict[str, dict[str, str]] = {}
        self._synced_at: float | None = None
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread = threading.Thread(target=self._run, name="node-inventory", daemon=True)

    def start(self) -> NodeInventory:
        """Start the background list+watch; returns self."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the background thread, cutting an open watch, and wait up to `timeout` s."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        # Watch.stop() can only cut a connection once its request is under way: repeat it
        while self._thread.is_alive() and time.monotonic() < deadline:
            current = self._watch
            if current is not None:
                current.stop()  # type: ignore[no-untyped-call]  # kubernetes.watch is unannotated
            self._thread.join(0.05)

    def running(self) -> bool:
        """True while the background list+watch thread is alive."""
        return self._thread.is_alive()

    def profiles(self) -> tuple[Profile, ...]:
        """The last snapshot of discovered classes; never blocks, never calls the API."""
        return self._profiles

    def age_seconds(self) -> float:
        """Seconds since it last heard from the API server (inf before the first list)."""
        synced = self._synced_at
        return math.inf if synced is None else time.monotonic() - synced

    def wait_synced(self, timeout: float) -> bool:
        """Wait until the first list has been applied; True if it was within `timeout` s."""
        return self._synced.wait(timeout)

    def _publish(self) -> None:
        self._profiles = profiles_from_labels(self._labels)
        self._synced_at = time.monotonic()
        self._synced.set()

    def _list(self) -> str | None:
        nodes = self._core.list_node(label_selector=MEM_LABEL, _request_timeout=30)
        # The apiserver names every Node; the model only types the fields as optional.
        self._labels = {
            n.metadata.name: dict(n.metadata.labels or {})
            for n in nodes.items
            if n.metadata is not None and n.metadata.name is not None
        }
        self._publish()
        # Always set by the apiserver; None would start the watch at the current state.
        return nodes.metadata.resource_version if nodes.metadata else None

    def _watch_from(self, version: str | None) -> str | None:
        """Apply watch events until the watch ends; returns the last resourceVersion seen."""
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]  # unannotated, as above
        # the read timeout outlasts the server-side timeout, so only a dead connection trips it
        for event in self._watch.stream(  # type: ignore[no-untyped-call]  # unannotated
            self._core.list_node,
            label_selector=MEM_LABEL,
            resource_version=version,
            timeout_seconds=self._watch_timeout_s,
            _request_timeout=(10, self._watch_timeout_s + 30),
        ):
            meta = event["raw_object"]["metadata"]
            version = meta.get("resourceVersion", version)
            if event["type"] == "DELETED":
                self._labels.pop(meta["name"], None)
            elif event["type"] in ("ADDED", "MODIFIED"):
                self._labels[meta["name"]] = dict(meta.get("labels") or {})
            self._publish()
        if not self._stop.is_set():
            self._synced_at = time.monotonic()  # a watch that ran its full term was healthy
        return version

    def _run(self) -> None:
        version, delay = None, self._backoff[0]
        while not self._stop.is_set():
            try:
                version = self._watch_from(version or self._list())
                delay = self._backoff[0]
                continue
            except ApiException as err:
                if err.status == 410:  # our resourceVersion was compacted away: list afresh
                    LOG.info("node inventory: watch expired (410), re-listing nodes")
                    version = None
                    continue
                cause = f"API server answered {err.status} {err.reason}"
            except (HTTPError, OSError) as err:
                cause = f"API server unreachable: {err}"
            if self._stop.is_set():
                break
            LOG.warning(
                "node inventory: %s; keeping the last snapshot, retrying in %.2fs", cause, delay
            )
            self._stop.wait(delay)
            delay = min(delay * 2, self._backoff[1])
