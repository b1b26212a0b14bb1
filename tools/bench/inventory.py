"""The Node inventory of `discoverProfiles` at scale: thousands of Nodes on the real apiserver.

Nodes are created as API objects in bulk (no kubelet: the inventory reads labels only), each
labelled as a lightweight node of one of four classes (`aliyun.accelerator/nvidia_mem` and
`nvidia_name`, webhook/scheduling.py `profiles_from_labels`). For each count, cumulatively:

- `list_s`: one list of the labelled Nodes, as the inventory lists them
  (webhook/kube/node_metadata.py `list_labels`: their metadata, in pages), from this
  process, median of three;
- a fresh `webhook serve` (2 workers × 8 threads) with the default policy plus
  `discoverProfiles: true`, as the admin (`$KUBECONFIG`): seconds from its /healthz to every
  worker knowing the four classes (`lwgpu_discovery_classes`), and RSS/PSS per process;
- the cost of a watch event: `events` label changes on Nodes, then one that adds a fifth
  class, awaited in `lwgpu_discovery_classes`; the workers' CPU over that span, per event
  and worker (every worker watches every Node);
- review latency: sequential reviews of the seed pod over one connection, median and p99.

Every count is bounded (the creates by count, each wait by a deadline); the control plane
and the server are stopped at the end.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import os
import ssl
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import yaml
from kubernetes import client

from tools.cluster import controlplane
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for
from webhook import DEFAULT_POLICIES
from webhook.api.names import MEM_LABEL, NAME_LABEL
from webhook.kube import node_metadata

from . import bodies, lineup, procs, timing

CLASSES = ((1024, "GRID-P4-1Q"), (2048, "GRID-P4-2Q"), (4096, "GRID-P4-4Q"), (8192, "GRID-P4-8Q"))
EXTRA_CLASS = "16384MiB"
MARK = "lwgpu-bench/tick"
CREATORS = 8  # concurrent connections creating Nodes
SYNC_S = 300
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _node(index: int) -> dict[str, Any]:
    mib, name = CLASSES[index % len(CLASSES)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"bench-node-{index:05d}",
            "labels": {
                "kubernetes.io/hostname": f"bench-node-{index:05d}",
                MEM_LABEL: f"{mib}MiB",
                NAME_LABEL: name,
            },
        },
    }


def _connection(plane: ControlPlane) -> http.client.HTTPSConnection:
    url = urlsplit(plane.server)
    assert url.hostname is not None and url.port is not None
    return http.client.HTTPSConnection(url.hostname, url.port, context=plane.admin_tls())


def _send(plane: ControlPlane, requests: list[tuple[str, str, bytes, str]]) -> list[int]:
    """Each (method, path, body, content type) in turn on one kept-alive connection."""
    conn = _connection(plane)
    statuses = []
    try:
        for method, path, body, kind in requests:
            conn.request(method, path, body, {"Content-Type": kind})
            answer = conn.getresponse()
            answer.read()
            statuses.append(answer.status)
    finally:
        conn.close()
    return statuses


def _in_parallel(plane: ControlPlane, requests: list[tuple[str, str, bytes, str]]) -> None:
    """Send `requests` over `CREATORS` connections; raise unless every one succeeded."""
    shares = [requests[i::CREATORS] for i in range(CREATORS)]
    with concurrent.futures.ThreadPoolExecutor(CREATORS) as pool:
        statuses = [s for done in pool.map(lambda share: _send(plane, share), shares) for s in done]
    failed = [s for s in statuses if s >= 300]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(statuses)} Node requests failed: {failed[:5]}")


def create_nodes(plane: ControlPlane, start: int, stop: int) -> float:
    """Create Nodes `start`..`stop - 1`; the seconds it took."""
    began = time.monotonic()
    _in_parallel(
        plane,
        [
            ("POST", "/api/v1/nodes", orjson.dumps(_node(i)), "application/json")
            for i in range(start, stop)
        ],
    )
    return time.monotonic() - began


def _label(plane: ControlPlane, indexes: list[int], key: str, value: str | None) -> None:
    patch = orjson.dumps({"metadata": {"labels": {key: value}}})
    _in_parallel(
        plane,
        [
            ("PATCH", f"/api/v1/nodes/bench-node-{i:05d}", patch, "application/merge-patch+json")
            for i in indexes
        ],
    )


def _list_s(plane: ControlPlane) -> float:
    core = client.CoreV1Api(plane.api())
    took = []
    for _ in range(3):
        began = time.monotonic()
        node_metadata.list_labels(core, MEM_LABEL)
        took.append(time.monotonic() - began)
    return round(statistics.median(took), 3)


@contextmanager
def _discovering(plane: ControlPlane, workdir: Path) -> Iterator[procs.Server]:
    tls = workdir / "tls"
    if not tls.exists():
        lineup.certificates(tls)
    policy = yaml.safe_load(DEFAULT_POLICIES.read_text())
    policy["spec"]["discoverProfiles"] = True
    (workdir / "discovering.yaml").write_text(yaml.safe_dump(policy))
    serve = [
        "serve",
        *lineup.tls_args(tls),
        *("--policies", str(workdir / "discovering.yaml"), "--workers", "2", "--threads", "8"),
    ]
    with procs.serving(
        "webhook-inventory",
        "webhook",
        serve,
        tls / "ca.crt",
        workdir,
        extra_env={"KUBECONFIG": str(plane.kubeconfig)},
    ) as server:
        yield server


def _classes(server: procs.Server, wanted: int) -> bool:
    # The gauge is the fewest classes any live worker knows: all of them know `wanted`.
    return server.metric("lwgpu_discovery_classes") == wanted


def _workers_ticks(server: procs.Server) -> int:
    return sum(procs.cpu_ticks(pid) for pid in procs.workers(server.process.pid))


def _reviews_ms(server: procs.Server, count: int) -> dict[str, float]:
    body = bodies.body(bodies.seed_pod())
    context = ssl.create_default_context(cafile=str(server.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    took = []
    try:
        for _ in range(count):
            began = time.perf_counter()
            conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
            took.append((time.perf_counter() - began) * 1000)
    finally:
        conn.close()
    return {
        "median_ms": round(statistics.median(took), 3),
        "p99_ms": round(timing.percentile(took, 0.99), 3),
    }


def _measure(plane: ControlPlane, workdir: Path, nodes: int, events: int) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": nodes, "list_s": _list_s(plane)}
    with _discovering(plane, workdir) as server:
        began = time.monotonic()
        wanted = len(CLASSES) if nodes else 0
        wait_for(lambda: _classes(server, wanted), SYNC_S, interval=0.05, what="the inventory")
        result["synced_s"] = round(time.monotonic() - began, 3)
        result["memory"] = procs.memory(server.process.pid)
        result["reviews"] = _reviews_ms(server, 300)
        if nodes:
            touched = list(range(min(events, nodes - 1)))
            before, began = _workers_ticks(server), time.monotonic()
            _label(plane, touched, MARK, str(nodes))
            _label(plane, [nodes - 1], MEM_LABEL, EXTRA_CLASS)
            wait_for(lambda: _classes(server, wanted + 1), SYNC_S, what="the watch events")
            used_s = (_workers_ticks(server) - before) / TICKS_PER_S
            workers = len(procs.workers(server.process.pid))
            result["events"] = {
                "count": len(touched) + 1,
                "seconds": round(time.monotonic() - began, 3),
                "cpu_ms_per_event_per_worker": round(
                    used_s * 1000 / (len(touched) + 1) / max(1, workers), 3
                ),
            }
            last_mib, _ = CLASSES[(nodes - 1) % len(CLASSES)]
            _label(plane, [nodes - 1], MEM_LABEL, f"{last_mib}MiB")
    return result


def inventory(
    workdir: Path, counts: tuple[int, ...] = (0, 5_000, 15_000), events: int = 300
) -> dict[str, Any]:
    """Each count of Nodes (ascending), measured with a fresh discovering webhook."""
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    with controlplane.running(workdir / "control-plane") as plane:
        made = 0
        for count in sorted(counts):
            created_s = create_nodes(plane, made, count) if count > made else 0.0
            made = max(made, count)
            rows.append(
                {**_measure(plane, workdir, count, events), "created_s": round(created_s, 1)}
            )
    return {"events": events, "rows": rows}
