"""Prometheus metrics of the admission server, correct across gunicorn worker processes.

In a gunicorn server ``PROMETHEUS_MULTIPROC_DIR`` is set by the master before this module
(or ``prometheus_client``) is first imported: prometheus-client picks its value store at
import time, and workers inherit the choice through fork. Each worker then writes its
values to memory-mapped files there and ``render()`` adds them up. Imported without the
variable (tests of the Flask app in one process) it uses the ordinary in-process registry.
"""

from __future__ import annotations

import contextlib
import glob
import os
import time
from collections.abc import Iterable
from datetime import datetime

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics_core import Metric

from .metrics_dir import MULTIPROC_ENV

# A review is a few dict walks: tens to hundreds of microseconds. Buckets start at 50 us so
# the histogram resolves that range, and reach the apiserver's 10 s default webhook timeout.
LATENCY_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
    2.5,
    10.0,
)

REVIEWS = Counter(
    "lwgpu_admission_reviews",
    "AdmissionReviews answered, by endpoint and decision (allowed, mutated, denied, skipped; "
    "would-mutate, would-deny where a policy in audit mode admitted what enforce would not).",
    ["endpoint", "decision"],
)
REQUEST_ERRORS = Counter(
    "lwgpu_admission_request_errors",
    "Requests to /mutate or /validate answered with an HTTP error instead of a review.",
    ["endpoint", "code"],
)
LATENCY = Histogram(
    "lwgpu_admission_review_duration_seconds",
    "Time from request received to response body ready, per endpoint.",
    ["endpoint"],
    buckets=LATENCY_BUCKETS,
)
POLICY_RELOADS = Counter("lwgpu_policy_reloads", "Policy loads that succeeded (each worker loads).")
POLICY_RELOAD_FAILURES = Counter(
    "lwgpu_policy_reload_failures", "Policy loads that failed; the last good policy stayed in use."
)
# livemin: the oldest generation any live worker still serves, i.e. what the fleet guarantees.
POLICY_GENERATION = Gauge(
    "lwgpu_policy_generation",
    "Successful policy loads of the worker serving the oldest policy (0: none loaded).",
    multiprocess_mode="livemin",
)
CERT_EXPIRY = Gauge(
    "lwgpu_certificate_expiry_seconds",
    "Seconds until the served TLS certificate expires (the soonest among live workers).",
    multiprocess_mode="livemin",
)


# (endpoint, decision) -> (counter child, histogram child). `.labels()` takes the metric's
# lock and builds a key tuple on every call (~10 us a review); the children never change.
_REVIEW_CHILDREN: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
# Only written while a policy has discoverProfiles: true (0 otherwise). livemax: the stalest
# worker's snapshot; livemin: the fewest classes any worker knows.
DISCOVERY_AGE = Gauge(
    "lwgpu_discovery_inventory_age_seconds",
    "Seconds since the Node inventory last heard from the API server (the stalest worker).",
    multiprocess_mode="livemax",
)
DISCOVERED_CLASSES = Gauge(
    "lwgpu_discovery_classes",
    "GPU classes discovered from Node labels (the fewest any live worker knows).",
    multiprocess_mode="livemin",
)


def observe_review(endpoint: str, decision: str, seconds: float) -> None:
    """Count one answered review and its latency."""
    children = _REVIEW_CHILDREN.get((endpoint, decision))
    if children is None:
        # setdefault is atomic under the GIL, and .labels() returns the same child anyway.
        children = _REVIEW_CHILDREN.setdefault(
            (endpoint, decision), (REVIEWS.labels(endpoint, decision), LATENCY.labels(endpoint))
        )
    children[0].inc()
    children[1].observe(seconds)


def observe_error(endpoint: str, code: int, seconds: float) -> None:
    """Count one request to a review endpoint that ended in an HTTP error, and its latency."""
    REQUEST_ERRORS.labels(endpoint, str(code)).inc()
    LATENCY.labels(endpoint).observe(seconds)


def policy_loaded(generation: int) -> None:
    """Record a successful policy load (``PolicyStore`` ``on_loaded`` callback)."""
    POLICY_RELOADS.inc()
    POLICY_GENERATION.set(generation)


def policy_failed(_message: str) -> None:
    """Record a failed policy load (``PolicyStore`` ``on_failed`` callback)."""
    POLICY_RELOAD_FAILURES.inc()


def discovery_state(age_seconds: float, classes: int) -> None:
    """Record the node inventory's snapshot age and class count (``Discovery`` ``report``)."""
    DISCOVERY_AGE.set(age_seconds)
    DISCOVERED_CLASSES.set(classes)


def certificate_expires(not_after: datetime) -> None:
    """Set the certificate expiry gauge from the served certificate's ``notAfter``."""
    CERT_EXPIRY.set(not_after.timestamp() - time.time())


class _WorkerFiles(multiprocess.MultiProcessCollector):
    """Every worker's metric files but those still empty.

    A worker creates each file empty and then sizes it (``MmapedDict``: open, truncate), so a
    scrape while a worker boots may find a file of 0 bytes, and prometheus-client's reader
    fails on it with ``struct.error``: /metrics answered 500 during worker restarts (issue
    28's faults). An empty file holds no value yet; a sized one reads as its used part.
    """

    def collect(self) -> Iterable[Metric]:
        """The merged metrics of the non-empty files."""
        files = []
        for path in glob.glob(os.path.join(self._path, "*.db")):
            with contextlib.suppress(FileNotFoundError):  # a dead worker's live gauge, removed
                if os.path.getsize(path):
                    files.append(path)
        merged: Iterable[Metric] = self.merge(files, accumulate=True)  # type: ignore[no-untyped-call]
        return merged


def render() -> tuple[bytes, str]:
    """The exposition text of every worker's metrics (or this process's) and its content type."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        # prometheus_client ships py.typed but leaves this constructor unannotated.
        _WorkerFiles(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
