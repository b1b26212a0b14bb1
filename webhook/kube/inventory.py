"""Discover which lightweight GPU classes exist from the Nodes' GPU memory labels: the cloud's
`aliyun.accelerator/nvidia_mem` and GPU Feature Discovery's `nvidia.com/gpu.memory`.

`NodeInventory` lists and then watches the Nodes that carry each label in a background daemon
thread of its own (a label selector cannot ask for one key or the other, and a list of every
Node would carry the CPU nodes' status too), and keeps the classes of the nodes of both
together as a snapshot of `Profile`s: a node carrying both labels is in both lists, one node
(`webhook.scheduling.profiles_from_labels`). Reviews only ever read that snapshot: the watch never
runs in the request path, and an unreachable API server leaves the last snapshot in place
(its age is what `/metrics` shows). Failures are retried with backoff; each cause (address
and cause in a few words) is logged once until the API server answers again, which is logged
once too.
Each Node is held as the labels its class depends on, counted by distinct value
(`webhook.kube.node_tally`), and the classes are recomputed only when a distinct value appears
or goes: a watch event costs the same at 15,000 Nodes as at 15. The apiserver sends only the
Nodes' metadata, the list in pages (`webhook.kube.node_metadata`).
A 403 from the start is no outage but an install without the Node grant: it is an error,
naming the permission and the fix, and said again every few minutes for as long as it lasts;
a 403 after the nodes were listed is a warning that says what likely caused it.
"""

from __future__ import annotations

import json
import logging
import math
import ssl
import threading
import time

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3 import exceptions as urllib3_exceptions

from webhook.kube import node_metadata
from webhook.kube.node_tally import NodeTally
from webhook.policy import Profile
from webhook.scheduling import MEMORY_LABELS, profiles_from_labels

LOG = logging.getLogger(__name__)
URLLIB3_LOG = logging.getLogger("urllib3.connectionpool")
# The base install grants the webhook's ServiceAccount nothing on Nodes: only a policy that
# discovers needs them, and the grant is an option of the install.
FORBIDDEN_FIX = (
    "profile discovery (a policy with discoverProfiles: true) needs list and watch on nodes:"
    " install the discovery option (kubectl apply -k deploy/overlays/discovery/, or the"
    " chart's discovery.enabled=true); serving the static profiles meanwhile"
)
# A refusal after the nodes were listed: the grant was there. A kube-apiserver that has just
# started answers before it has read its RBAC bindings (until then its /readyz fails
# `informer-sync`, staging/src/k8s.io/apiserver/pkg/server/healthz/healthz.go) and refuses
# meanwhile: measured here, a 403 right after a restart (tools/reliability/apiserver_faults.py).
WAS_ALLOWED = (
    "nodes were listed until now: an API server that has just started refuses until it has"
    " read its RBAC rules, or the grant was removed"
)
# How often a refusal that lasts is said again.
REMIND_S = 300.0


class NodeInventory:
    """The lightweight GPU classes present in the cluster, kept fresh by list+watch.

    `core` is a CoreV1Api; the caller builds it (in-cluster or kubeconfig) and only GET, LIST
    and WATCH on nodes are used, one list+watch per label of `MEMORY_LABELS`, each in its own
    thread. `backoff` is (first, max) seconds between failed attempts;
    `watch_timeout_s` bounds one watch request, after which it resumes from its resourceVersion;
    `remind_s` is how often a lasting 403 is logged again.
    """

    def __init__(
        self,
        core: client.CoreV1Api,
        backoff: tuple[float, float] = (0.5, 30.0),
        watch_timeout_s: int = 300,
        remind_s: float = REMIND_S,
    ):
        self._core, self._backoff, self._watch_timeout_s = core, backoff, watch_timeout_s
        self._remind_s = remind_s
        self._profiles: tuple[Profile, ...] = ()
        # Per label selector: each listed Node's class labels, and when the apiserver last
        # answered (monotonic). Written by the selector's thread under the lock; the failure
        # being reported (`_failing`) is the threads' together, under it too.
        self._nodes = NodeTally(MEMORY_LABELS)
        self._synced_at: dict[str, float] = {}
        # Reentrant: `_publish` reports the API server answering again, under it already.
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        # The causes logged since requests began to fail, and when each was (monotonic).
        self._failing: dict[str, float] = {}
        self._watches: dict[str, watch.Watch] = {}
        self._threads = [
            threading.Thread(
                target=self._run, args=(key,), name=f"node-inventory {key}", daemon=True
            )
            for key in MEMORY_LABELS
        ]

    def start(self) -> NodeInventory:
        """Start the background list+watches; returns self."""
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the background threads, cutting open watches, and wait up to `timeout` s."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        # Watch.stop() can only cut a connection once its request is under way: repeat it
        while self.running() and time.monotonic() < deadline:
            for current in list(self._watches.values()):
                current.stop()  # type: ignore[no-untyped-call]  # kubernetes.watch is unannotated
            for thread in self._threads:
                thread.join(0.05 / len(self._threads))

    def running(self) -> bool:
        """True while a background list+watch thread is alive."""
        return any(thread.is_alive() for thread in self._threads)

    def profiles(self) -> tuple[Profile, ...]:
        """The last snapshot of discovered classes; never blocks, never calls the API."""
        return self._profiles

    def age_seconds(self) -> float:
        """Seconds since it last heard from the API server on every label (inf before the
        first lists)."""
        synced = self._synced_at
        if len(synced) < len(MEMORY_LABELS):
            return math.inf
        return time.monotonic() - min(synced.values())

    def wait_synced(self, timeout: float) -> bool:
        """Wait until the first list of every label has been applied; True if it was within
        `timeout` s."""
        return self._synced.wait(timeout)

    def _publish(self, key: str, changed: bool) -> None:
        """After `key`'s thread changed its Nodes (the lock is held): the classes again where
        a distinct value appeared or went. An equal result keeps the snapshot, the same
        object, so the workers' merged policies stay cached (webhook.server.state.discovery)."""
        self._answered()
        if changed:
            found = profiles_from_labels(self._nodes.distinct())
            if found != self._profiles:
                self._profiles = found
        self._synced_at[key] = time.monotonic()
        if len(self._synced_at) == len(MEMORY_LABELS):
            self._synced.set()

    def _list(self, key: str) -> str | None:
        listed, version = node_metadata.list_labels(self._core, key)
        with self._lock:
            self._publish(key, self._nodes.replace(key, listed.items()))
        return version

    def _watch_from(self, key: str, version: str | None) -> str | None:
        """Apply watch events until the watch ends; returns the last resourceVersion seen."""
        following = self._watches[key] = watch.Watch()  # type: ignore[no-untyped-call]  # as above
        # the read timeout outlasts the server-side timeout, so only a dead connection trips it
        for event in following.stream(  # type: ignore[no-untyped-call]  # unannotated
            node_metadata.watcher(self._core),
            label_selector=key,
            resource_version=version,
            timeout_seconds=self._watch_timeout_s,
            _request_timeout=(10, self._watch_timeout_s + 30),
        ):
            meta = event["raw_object"]["metadata"]
            version = meta.get("resourceVersion", version)
            with self._lock:
                if event["type"] == "DELETED":
                    changed = self._nodes.drop(key, meta["name"])
                elif event["type"] in ("ADDED", "MODIFIED"):
                    changed = self._nodes.put(key, meta["name"], meta.get("labels") or {})
                else:
                    changed = False
                self._publish(key, changed)
        if not self._stop.is_set():
            self._synced_at[key] = time.monotonic()  # a watch that ran its full term was healthy
            self._answered()
        return version

    def _run(self, key: str) -> None:
        # urllib3 retries each failed request three times and warns each time: this loop backs
        # off and reports on its own, so those warnings are dropped for this thread only.
        retries = _QuietRetries(threading.get_ident())
        URLLIB3_LOG.addFilter(retries)
        try:
            self._loop(key)
        finally:
            URLLIB3_LOG.removeFilter(retries)

    def _loop(self, key: str) -> None:
        version, delay = None, self._backoff[0]
        while not self._stop.is_set():
            try:
                version = self._watch_from(key, version or self._list(key))
                delay = self._backoff[0]
                continue
            except ApiException as err:
                if err.status == 410:  # our resourceVersion was compacted away: list afresh
                    LOG.info("node inventory: watch expired (410), re-listing nodes")
                    version = None
                    continue
                if err.status >= 500:
                    # Resuming from the same resourceVersion can fail the same way for good:
                    # after a compaction, etcd's event without its previous value is a 500
                    # ("etcd event received with PrevKv=nil"). List afresh, as client-go's
                    # reflector does after a failed watch (ListAndWatch starts with a list).
                    version = None
                forbidden = err.status == 403
                cause = f"API server {self._host()} answered {err.status} {err.reason}"
                if forbidden:
                    fix = WAS_ALLOWED if self._synced.is_set() else FORBIDDEN_FIX
                    cause = f"{cause}: {refusal(err)}; {fix}"
            except (urllib3_exceptions.HTTPError, OSError) as err:
                forbidden = False
                cause = f"cannot reach the API server {self._host()}: {failure(err)}"
            if self._stop.is_set():
                break
            self._failed(cause, delay, forbidden)
            self._stop.wait(delay)
            delay = min(delay * 2, self._backoff[1])

    def _host(self) -> str:
        return str(self._core.api_client.configuration.host)

    def _failed(self, cause: str, delay: float, forbidden: bool) -> None:
        # One warning for each cause of a failure, the first time it is met until the API
        # server answers again; the retries in between (of every thread) are debug lines, so an
        # API server that is away for hours costs one log line, or one per cause where they
        # alternate (a load balancer with no apiserver behind it resets some connections and
        # lets others reach the TLS handshake). A refusal is the install's to fix, not the
        # network's: an error, repeated now and then so that it is still in the log when
        # someone looks for why nothing was discovered.
        with self._lock:
            now = time.monotonic()
            said = self._failing.get(cause)
            reminded = forbidden and said is not None and now - said >= self._remind_s
            if said is not None and not reminded:
                LOG.debug("node inventory: still %s; retrying in %.2fs", cause, delay)
                return
            self._failing[cause] = now
            kept = "keeping the last snapshot" if self._synced.is_set() else "no nodes listed yet"
            # a refusal from the start is the install's; one after nodes were listed, likely not
            level = logging.ERROR if forbidden and not self._synced.is_set() else logging.WARNING
            LOG.log(level, "node inventory: %s; %s, retrying in %.2fs", cause, kept, delay)

    def _answered(self) -> None:
        with self._lock:
            if self._failing:
                self._failing = {}
                LOG.info("node inventory: the API server %s answers again", self._host())


class _QuietRetries(logging.Filter):
    """Drops urllib3's "Retrying (Retry(...)) after connection broken by ..." records of one
    thread."""

    def __init__(self, thread: int):
        super().__init__()
        self._thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self._thread or not str(record.msg).startswith("Retrying")


def refusal(err: ApiException) -> str:
    """The apiserver's own words for a refusal (its Status message names the user, the verb
    and the resource), or the body as sent when it is not a Status."""
    body = err.body.decode(errors="replace") if isinstance(err.body, bytes) else str(err.body)
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        message = None
    return message if isinstance(message, str) and message else body.strip()[:300]


def failure(err: BaseException) -> str:
    """Why a request failed, in a few words: the OS's or TLS's reason behind urllib3's error."""
    seen: BaseException | None = err
    for _ in range(8):  # the chain is short; the bound only guards against a cycle
        if seen is None:
            break
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"its TLS certificate is not trusted ({seen.verify_message})"
        if isinstance(seen, ssl.SSLError):
            return f"the TLS handshake failed ({seen.reason or 'no reason given'})"
        if isinstance(seen, TimeoutError | urllib3_exceptions.TimeoutError) and not isinstance(
            seen, urllib3_exceptions.NewConnectionError
        ):
            return "timed out"
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror.lower()
        reason = getattr(seen, "reason", None)
        seen = reason if isinstance(reason, BaseException) else seen.__cause__ or seen.__context__
    return "the connection failed"
