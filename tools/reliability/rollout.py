"""Rolling restart and node drain under creates: `python -m tools.reliability.rollout
[SCENARIO...] [--out FILE]`.

Starts the real control plane (tools/cluster: etcd, kube-apiserver with
`--enable-aggregator-routing=true`, the controller manager, the scheduler, the test fleet's
Nodes), installs lwgpu as `kubectl apply -k deploy/` does and follows the webhook
Deployment's pods with the stand-in kubelet (`tools/cluster/pod_lifecycle.py`: it runs
`preStop`, SIGTERM and the grace period as kubelet does). kube-apiserver calls the webhook
through its Service at a ready endpoint's address. Then, per scenario, a steady stream of
dry-run creates of a GPU-memory pod (`creates.py`) runs through kube-apiserver while:

- restart: `kubectl rollout restart deployment/lwgpu-webhook` (maxSurge 1, maxUnavailable 0);
- late-endpoints: the same, while a second EndpointSlice of the Service, managed here, keeps
  each stopping replica's address listed until 3 s after its server got SIGTERM, as when
  endpoint removal propagates slowly (`LateEndpoints`);
- drain: both replicas' nodes cordoned, then `kubectl drain` of the first and, as soon as
  its pod is evicted, of the second, which the PodDisruptionBudget (minAvailable 1) refuses
  until the first one's replacement is Ready.

One row per scenario: creates sent, failed (not admitted), admitted unrewritten, how long
creates kept failing after the fault, the recovery (fault -> the new replicas Ready and the
old ones gone), and the 1-minute load average when it ended. The rows, with the errors, go
to `bench-results/reliability-rollout.json` (git-ignored). Each scenario is bounded: its
stream by a count, every wait by a deadline.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.cluster import binaries
from tools.cluster.install import NAMESPACE
from tools.paths import REPO
from tools.reliability.creates import Create, CreateStream
from tools.reliability.late_endpoints import LateEndpoints
from tools.reliability.report import command_line, publish
from tools.reliability.webhook_cluster import DEPLOYMENT, SETTLE_S, Cluster, cluster
from tools.waiting import wait_for

OUT = REPO / "bench-results" / "reliability-rollout.json"
SECONDS = 60  # of creates per scenario, at least: the stream runs TAIL_S past the recovery
STRIKE_AT_S = 10  # into the stream
TAIL_S = 5  # of creates after the recovery
DRAIN = ("drain", "--ignore-daemonsets", "--delete-emptydir-data")
PDB_REFUSAL = "violate the pod's disruption budget"
# What kube-apiserver logs when a call to the webhook fails (staging/src/k8s.io/apiserver/pkg/
# admission/plugin/webhook/mutating/dispatcher.go, "Failed calling webhook, failing open").
FAILED_CALL = re.compile(
    r"^W.*Failed calling webhook, failing open mutate\.lwgpu\.io: .*"
    r'failed to call webhook: Post "[^"]*": (?P<why>.*)$',
    re.MULTILINE,
)
ADDRESS = re.compile(r"\d+\.\d+\.\d+\.\d+:\d+")


def failed_calls(c: Cluster, since: int) -> Counter[str]:
    """Why kube-apiserver's calls to the webhook failed (it logs each as it fails open),
    from byte `since` of its log on, addresses left out."""
    with c.plane.log("kube-apiserver").open("rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return Counter(ADDRESS.sub("ADDR", m["why"]) for m in FAILED_CALL.finditer(text))


def row(
    fault: str,
    stream: CreateStream,
    struck: float,
    recovery_s: float,
    note: str,
    calls: Counter[str],
    **extra: Any,
) -> dict[str, Any]:
    records = stream.records
    bad = [r for r in records if r.failed or r.unrewritten]
    if calls:
        note += "; the apiserver failed open on " + ", ".join(
            f"{n} x {why}" for why, n in calls.most_common()
        )
    return {
        "fault": fault,
        "load": f"{stream.rate:g}/s ({stream.achieved():.0f}/s sent)",
        "creates": len(records),
        "failed": sum(r.failed for r in records),
        "unrewritten": sum(r.unrewritten for r in records),
        "failing_for_s": round(max((r.end - struck for r in bad), default=0.0), 2),
        "recovery_s": round(recovery_s, 2),
        "sent_late": stream.late,
        "load_average": os.getloadavg()[0],
        "errors": Counter(str(r.error) for r in bad).most_common(10),
        "failures": [_relative(r, struck) for r in bad[:50]],
        "failed_webhook_calls": dict(calls),
        "note": note,
        **extra,
    }


def _relative(record: Create, struck: float) -> dict[str, Any]:
    return {
        "start_s": round(record.start - struck, 3),
        "end_s": round(record.end - struck, 3),
        "status": record.status,
        "error": record.error,
    }


def create_stream(c: Cluster, rate: float) -> CreateStream:
    """`rate` creates a second, bounded by what the longest scenario could send."""
    return CreateStream(c.plane, c.namespace, rate, int(rate * (SECONDS + SETTLE_S + TAIL_S)))


def finish(stream: CreateStream, seconds: float) -> None:
    """Stop the stream once it ran `seconds`, and `TAIL_S` past the recovery."""
    stream.wait_sent(
        max(int(stream.rate * seconds), len(stream.records) + int(stream.rate * TAIL_S))
    )
    stream.stop()


def restart(c: Cluster, rate: float, seconds: float = SECONDS, late_s: float = 0) -> dict[str, Any]:
    """`kubectl rollout restart` of the webhook under `rate` creates a second; with `late_s`,
    each stopping replica stays listed in a second EndpointSlice until `late_s` past SIGTERM."""
    replaced = c.names()
    since = c.plane.log("kube-apiserver").stat().st_size
    late = LateEndpoints(c.plane, c.pods, late_s) if late_s else contextlib.nullcontext()
    with late, create_stream(c, rate) as stream:
        stream.wait_sent(int(rate * min(STRIKE_AT_S, seconds / 4)))
        struck = time.monotonic()
        c.plane.kubectl("rollout", "restart", DEPLOYMENT, "-n", NAMESPACE)
        c.wait_settled(replaced)
        recovered = time.monotonic() - struck
        finish(stream, seconds)
    exits = [code for name in replaced for code in c.pods.exits.get(name, [])]
    return row(
        "kubectl rollout restart"
        + (f", stopping replicas listed {late_s:g} s past SIGTERM" if late_s else ""),
        stream,
        struck,
        recovered,
        f"{len(replaced)} pods replaced; their containers exited {sorted(exits)}",
        failed_calls(c, since),
        replaced=sorted(replaced),
        exit_codes=exits,
    )


def drain(c: Cluster, rate: float, seconds: float = SECONDS) -> dict[str, Any]:
    """Both replicas' nodes cordoned, then drained one after the other, under creates."""
    first, second = sorted(c.pods.pods(), key=lambda p: str(p["spec"]["nodeName"]))[:2]
    nodes = [first["spec"]["nodeName"], second["spec"]["nodeName"]]
    if nodes[0] == nodes[1]:  # anti-affinity is only preferred
        raise RuntimeError(f"both replicas run on {nodes[0]}: no drain of one replica's node")
    replaced = c.names()
    since = c.plane.log("kube-apiserver").stat().st_size
    with create_stream(c, rate) as stream, ThreadPoolExecutor(2) as pool:
        stream.wait_sent(int(rate * min(STRIKE_AT_S, seconds / 4)))
        struck = time.monotonic()
        c.plane.kubectl("cordon", *nodes)
        drains = [pool.submit(c.plane.kubectl, *DRAIN, nodes[0], "--timeout=150s")]
        wait_for(
            lambda: first["metadata"]["name"] not in _live(c),
            60,
            what=f"{first['metadata']['name']} evicted",
        )
        drains.append(pool.submit(c.plane.kubectl, *DRAIN, nodes[1], "--timeout=150s"))
        outputs = [d.result().stderr for d in drains]
        c.wait_settled(replaced)
        recovered = time.monotonic() - struck
        finish(stream, seconds)
    c.plane.kubectl("uncordon", *nodes)
    refusals = outputs[1].count(PDB_REFUSAL)
    return row(
        "kubectl drain of both replicas' nodes",
        stream,
        struck,
        recovered,
        f"the second replica's eviction refused {refusals} times (PodDisruptionBudget) "
        f"until the first one's replacement was Ready",
        failed_calls(c, since),
        nodes=nodes,
        pdb_refusals=refusals,
        drain_output=outputs,
    )


def _live(c: Cluster) -> set[str]:
    """The webhook's pods not being deleted."""
    return {
        p["metadata"]["name"] for p in c.pods.pods() if not p["metadata"].get("deletionTimestamp")
    }


SCENARIOS: dict[str, Callable[[Cluster], dict[str, Any]]] = {
    "restart": functools.partial(restart, rate=20),
    "restart-100": functools.partial(restart, rate=100),
    "late-endpoints": functools.partial(restart, rate=20, late_s=3),
    "late-endpoints-100": functools.partial(restart, rate=100, late_s=3),
    "drain": functools.partial(drain, rate=20),
}


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as the Markdown table docs/RELIABILITY.md shows."""
    head = (
        "| fault | load | creates | failed | admitted unrewritten | failing for (s) "
        "| recovery (s) | load avg | note |\n|---|---|---:|---:|---:|---:|---:|---:|---|"
    )
    lines = [
        f"| {r['fault']} | {r['load']} | {r['creates']} | {r['failed']} | {r['unrewritten']} "
        f"| {r['failing_for_s']:.2f} | {r['recovery_s']:.2f} | {r['load_average']:.2f} "
        f"| {r['note']} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


def main(
    argv: list[str] | None = None,
    module: str = "tools.reliability.rollout",
    doc: str = __doc__,
    scenarios: dict[str, Callable[[Cluster], dict[str, Any]]] = SCENARIOS,
    out: Path = OUT,
) -> int:
    """Run the chosen scenarios (all by default) on one cluster; print the table. The
    rotation script runs its own `scenarios` through this too."""
    parser, names, out = command_line(
        f"python -m {module}", doc.split("\n\n")[0], "scenario", list(scenarios), out, argv
    )
    if absent := binaries.missing():
        parser.error(f"not built: {', '.join(absent)}; {binaries.HOW_TO_BUILD}")
    before = os.getloadavg()
    rows = run(names, scenarios)
    publish(table(rows), rows, before, out)
    return 0


def run(
    names: list[str], scenarios: dict[str, Callable[[Cluster], dict[str, Any]]] = SCENARIOS
) -> list[dict[str, Any]]:
    """The rows of the scenarios named, in that order, on one cluster of their own."""
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="lwgpu-rollout-") as scratch,
        cluster(Path(scratch)) as c,
    ):
        for name in names:
            print(f"scenario {name} ...", file=sys.stderr, flush=True)
            rows.append(scenarios[name](c))
    return rows


if __name__ == "__main__":
    sys.exit(main())
