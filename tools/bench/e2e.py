"""End to end over TLS with keep-alive: `webhook serve` against its peers, and its memory.

Every server in the lineup (`lineup.py`) runs at the same time on the same certificates.
Closed loop: for each connection count, each repeat runs every server once, back to back,
in an order that rotates between repeats, so load from elsewhere on the shared machine hits
all of them alike; each repeat's ratios (webhook / peer) come from runs seconds apart, and
their range is the table's error bar. Fixed rate: the same rotation at a fixed offered rate,
for latency percentiles that measure the server rather than a queue. Every wrk run is bounded
in time, and the memory runs also in count.
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from webhook.policy import PolicySet

from . import lineup, procs, rounds, wrk

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _prepare(workdir: Path, body: bytes) -> tuple[Path, Path, Path]:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install -y wrk)")
    workdir.mkdir(parents=True, exist_ok=True)
    tls = workdir / "tls"
    lineup.certificates(tls)
    (workdir / "body.json").write_bytes(body)
    return tls, workdir / "body.json", wrk.write_script(workdir / "bench.lua")


def _measured(server: procs.Server, body: Path, script: Path, **options: Any) -> dict[str, Any]:
    """A wrk run, plus the CPU the server's workers (or its one process) used per request.

    `busiest_worker_share` near 1.0 says one worker took every connection: the run then
    measured one worker, not two.
    """
    pids = procs.workers(server.process.pid) or [server.process.pid]
    before = [procs.cpu_ticks(pid) for pid in pids]
    result = wrk.run(server.url + "/mutate", body, script, **options)
    used = [procs.cpu_ticks(pid) - start for pid, start in zip(pids, before, strict=True)]
    result["cpu_us_per_request"] = round(sum(used) / TICKS_PER_S * 1e6 / max(1, result["requests"]))
    result["busiest_worker_share"] = round(max(used) / max(1, sum(used)), 2)
    return result


def _aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str, scale: float = 1.0) -> float:
        return round(float(statistics.median(r[key] for r in runs)) / scale, 3)

    return {
        "rps": median("rps"),
        "p50_ms": median("p50_us", 1000),
        "p99_ms": median("p99_us", 1000),
        "p999_ms": median("p999_us", 1000),
        "p99_ms_range": [
            round(min(r["p99_us"] for r in runs) / 1000, 3),
            round(max(r["p99_us"] for r in runs) / 1000, 3),
        ],
        "errors": sum(r["errors_total"] for r in runs),
        "busiest_worker_share": max(r["busiest_worker_share"] for r in runs),
        "cpu_us_per_request": median("cpu_us_per_request"),
        "runs": runs,
    }


def _series(
    servers: dict[str, procs.Server],
    body: Path,
    script: Path,
    *,
    repeats: int,
    warmup_s: float,
    **options: Any,
) -> dict[str, Any]:
    """Each server once per repeat, order rotating; per server the aggregate, and per peer
    the webhook's ratios to it within each repeat (throughput, CPU per request, p99)."""
    names = list(servers)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name in rounds.rotated(names, repeat):
            if warmup_s:
                wrk.run(
                    servers[name].url + "/mutate",
                    body,
                    script,
                    **{**options, "duration_s": warmup_s},
                )
            runs[name].append(_measured(servers[name], body, script, **options))
    ours = runs["webhook"]
    ratios = {
        name: {
            "rps": [round(a["rps"] / b["rps"], 3) for a, b in zip(ours, theirs, strict=True)],
            "cpu": [
                round(a["cpu_us_per_request"] / max(1, b["cpu_us_per_request"]), 3)
                for a, b in zip(ours, theirs, strict=True)
            ],
            "p99": [
                round(a["p99_us"] / max(1, b["p99_us"]), 3)
                for a, b in zip(ours, theirs, strict=True)
            ],
        }
        for name, theirs in runs.items()
        if name != "webhook"
    }
    return {"servers": {name: _aggregate(r) for name, r in runs.items()}, "ratios": ratios}


def end_to_end(
    workdir: Path,
    body: bytes,
    policies: PolicySet,
    *,
    names: tuple[str, ...] = lineup.NAMES,
    against: str | None = None,
    connections: tuple[int, ...] = (8, 64),
    duration_s: float = 5,
    warmup_s: float = 1,
    repeats: int = 4,
    rate: int = 200,
    rate_connections: int = 8,
    rate_duration_s: float = 15,
    rate_repeats: int = 2,
    workers: int = 2,
    threads: int = 8,
) -> dict[str, Any]:
    """Closed-loop levels, then the fixed rate, for every server of the lineup."""
    tls, body_file, script = _prepare(workdir, body)
    found, skipped = lineup.contenders(
        names, tls, workdir, policies, workers=workers, threads=threads, against=against
    )
    results: dict[str, Any] = {
        "workers": workers,
        "threads": threads,
        "duration_s": duration_s,
        "repeats": repeats,
        "body_bytes": len(body),
        "skipped": skipped,
        "levels": [],
    }
    with ExitStack() as stack:
        servers = lineup.start(stack, found, tls / "ca.crt", workdir)
        results["decision"] = lineup.check_answers(servers, body)
        for count in connections:
            level = _series(
                servers,
                body_file,
                script,
                repeats=repeats,
                warmup_s=warmup_s,
                connections=count,
                duration_s=duration_s,
            )
            results["levels"].append({"connections": count, **level})
        if rate:
            # Each connection waits 0..2x this between requests: `rate` per second in all.
            delay_ms = round(rate_connections * 1000 / rate)
            fixed = _series(
                servers,
                body_file,
                script,
                repeats=rate_repeats,
                warmup_s=0,
                connections=rate_connections,
                duration_s=rate_duration_s,
                delay_ms=delay_ms,
            )
            results["rate"] = {
                "offered": rate,
                "connections": rate_connections,
                "duration_s": rate_duration_s,
                "repeats": rate_repeats,
                **fixed,
            }
    return results


def _reached(server: procs.Server, goal: int) -> bool:
    return server.reviews() >= goal


def memory(
    workdir: Path,
    body: bytes,
    *,
    checkpoints: tuple[int, ...] = (10_000, 50_000),
    connections: int = 8,
    workers: int = 2,
    threads: int = 8,
    max_phase_s: float = 300,
) -> dict[str, Any]:
    """RSS/PSS of a fresh `webhook serve` (master + workers) at start and after each checkpoint.

    Reviews are counted by the server's own metrics; each phase is bounded both by
    the number of reviews (wrk stops each thread at its share) and by `max_phase_s`.
    """
    tls, body_file, script = _prepare(workdir, body)
    serve = [
        "serve",
        *lineup.tls_args(tls),
        "--workers",
        str(workers),
        "--threads",
        str(threads),
    ]
    samples = []
    with procs.serving("webhook-memory", "webhook", serve, tls / "ca.crt", workdir) as server:
        samples.append({"reviews": server.reviews(), **procs.memory(server.process.pid)})
        for target in checkpoints:
            missing = target - server.reviews()
            if missing > 0:
                wrk.run(
                    server.url + "/mutate",
                    body_file,
                    script,
                    connections=connections,
                    duration_s=max_phase_s,
                    limit_per_thread=-(-missing // min(2, connections)),
                    until=functools.partial(_reached, server, target),
                )
            samples.append({"reviews": server.reviews(), **procs.memory(server.process.pid)})
    first, last = samples[1], samples[-1]
    growth = round(last["rss_mib"] - first["rss_mib"], 1)
    return {
        "samples": samples,
        "growth_rss_mib": growth,
        "growth_pct": round(100 * growth / first["rss_mib"], 2),
    }
