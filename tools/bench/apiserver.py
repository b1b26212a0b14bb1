"""Added latency per pod create as kube-apiserver sees it: no webhook, lwgpu, floor, Go, MAP.

On the real control plane (tools/cluster), with the variants of `variants.py` registered side
by side, dry-run creates of the seed pod (`aliyun.com/gpu-mem: 2`; `dryRun=All` runs every
admission step and stores nothing, so rounds repeat) are sent as the admin over kept-alive
connections (`connected.py`): open loop at fixed offered rates, and bursts of concurrent
creates. For each level the variants run back to back, in an order rotating between rounds,
each run bounded in count (and its creates by the client's 30 s patience).

Per run: the latency the client sees for each create, failed creates (no 201), creates of a
webhook variant admitted unrewritten (the configuration fails open: an unreachable webhook
shows there), the time the whole burst took, and the apiserver's own histograms from its
/metrics (the difference of a scrape before and after the run;
staging/src/k8s.io/apiserver/pkg/admission/metrics/metrics.go, `newAdmissionMetrics`):
`apiserver_admission_webhook_admission_duration_seconds` (each call of a webhook,
`ObserveWebhook`) and `apiserver_admission_step_admission_duration_seconds` of the `admit`
step (every mutating plugin, the MAP included, `ObserveAdmissionStep`), both for CREATE.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.cluster import controlplane
from tools.cluster.controlplane import ControlPlane
from tools.reliability.creates import Create
from webhook.policy import PolicySet

from . import connected, histogram, rounds, timing, variants
from .histogram import Histogram

HISTOGRAMS = {
    "webhook": "apiserver_admission_webhook_admission_duration_seconds",
    "admit": "apiserver_admission_step_admission_duration_seconds",
}
CREATES = {"operation": "CREATE", "type": "admit"}
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
WARMUP = (20, 1.0)  # creates/s and seconds per variant, before any level: connections opened


@dataclass(frozen=True)
class Level:
    """Creates at `size` a second for the run's seconds, or a burst of `size` at once."""

    burst: bool
    size: int

    @property
    def name(self) -> str:
        """How the tables name the level."""
        return f"burst of {self.size}" if self.burst else f"{self.size}/s"


def _scrape(plane: ControlPlane) -> dict[str, Histogram]:
    status, data = plane.get("/metrics")
    if status != 200:
        raise RuntimeError(f"kube-apiserver /metrics answered {status}")
    text = data.decode()
    return {key: histogram.read(text, name, CREATES) for key, name in HISTOGRAMS.items()}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def _latencies(creates: list[Create]) -> list[float]:
    return [(c.end - c.start) * 1000 for c in creates]


def _percentiles(latencies: list[float]) -> dict[str, float | None]:
    return {
        f"{key}_ms": round(timing.percentile(latencies, q), 2) if latencies else None
        for key, q in QUANTILES.items()
    }


def _apiserver(seen: dict[str, Histogram]) -> dict[str, Any]:
    return {
        key: {
            "count": int(h.count),
            "mean_ms": _ms(h.mean()),
            **{f"{name}_ms": _ms(h.quantile(q)) for name, q in QUANTILES.items()},
        }
        for key, h in seen.items()
    }


def _run(
    plane: ControlPlane, variant: str, level: Level, seconds: float
) -> tuple[dict[str, Any], list[float], dict[str, Histogram]]:
    """One run: its summary, its latencies (ms) and the apiserver's histograms of it."""
    where = variants.namespace(variant)
    before = _scrape(plane)
    if level.burst:
        planned, creates = level.size, connected.burst(plane, where, level.size)
    else:
        planned = max(1, round(level.size * seconds))
        creates = connected.stream(plane, where, level.size, seconds)
    after = _scrape(plane)
    seen = {key: after[key].minus(before[key]) for key in after}
    latencies = _latencies(creates)
    admitted = [c for c in creates if not c.failed]
    errors = sorted({c.error or str(c.status) for c in creates if c.failed})
    summary = {
        "creates": planned,
        "failed": planned - len(admitted),
        "unrewritten": 0 if variant == "none" else sum(c.unrewritten for c in creates),
        "span_s": round(max(c.end for c in creates) - min(c.start for c in creates), 3)
        if creates
        else None,
        **_percentiles(latencies),
        "apiserver": _apiserver(seen),
        "errors": errors[:3],
    }
    return summary, latencies, seen


def _compare(
    ours: list[float], theirs: list[float]
) -> dict[str, float | list[float | None] | tuple[float, float] | None]:
    each = rounds.per_round(ours, theirs)
    return {
        "of_medians": rounds.of_medians(ours, theirs),
        "rounds": each,
        "range": rounds.span(each),
    }


def _known(per_round: dict[str, list[Any]], base: list[dict[str, Any]]) -> bool:
    # A run in which no create was answered has no percentiles to subtract.
    values = [*per_round.values(), *([r[f"{key}_ms"] for r in base] for key in per_round)]
    return all(v is not None for series in values for v in series)


def level_result(
    level: Level,
    runs: dict[str, list[dict[str, Any]]],
    pooled: dict[str, list[float]],
    seen: dict[str, dict[str, Histogram]],
) -> dict[str, Any]:
    """Per variant: pooled percentiles, the apiserver's pooled histograms, each round's
    figures and what it adds over `none` in the same round; lwgpu's ratios to the others."""
    result: dict[str, Any] = {"level": level.name, "burst": level.burst, "variants": {}}
    base = runs.get("none")
    for variant, mine in runs.items():
        per_round = {key: [r[f"{key}_ms"] for r in mine] for key in ("p50", "p99")}
        row: dict[str, Any] = {
            "rounds": len(mine),
            "creates": sum(r["creates"] for r in mine),
            "failed": sum(r["failed"] for r in mine),
            "unrewritten": sum(r["unrewritten"] for r in mine),
            **_percentiles(pooled[variant]),
            "span_s": [r["span_s"] for r in mine],
            "per_round_ms": per_round,
            "apiserver": _apiserver(seen[variant]),
            "errors": sorted({e for r in mine for e in r["errors"]})[:3],
        }
        if base is not None and variant != "none" and _known(per_round, base):
            row["added_ms"] = {
                key: rounds.added(values, [r[f"{key}_ms"] for r in base])
                for key, values in per_round.items()
            }
            row["added_median_ms"] = {
                key: round(statistics.median(values), 2) for key, values in row["added_ms"].items()
            }
        result["variants"][variant] = row
    # lwgpu against each other variant; the floor against Go: the part of lwgpu's ratio to Go
    # that the stack (gunicorn, Python's TLS, HTTP/1.1) already has before lwgpu's code runs.
    for name, others in (("lwgpu", ("floor", "go", "go-h2", "map")), ("floor", ("go",))):
        result[f"{name}_over"] = _ratios(result["variants"], name, others, level.burst)
    return result


def _ratios(
    rows: dict[str, dict[str, Any]], mine: str, others: tuple[str, ...], burst: bool
) -> dict[str, dict[str, Any]]:
    ours, found = rows.get(mine), {}
    for other in others:
        theirs = rows.get(other)
        if ours is None or theirs is None or "added_ms" not in ours or "added_ms" not in theirs:
            continue
        ratios = {
            f"added_{key}": _compare(ours["added_ms"][key], theirs["added_ms"][key])
            for key in ("p50", "p99")
        }
        if burst:
            ratios["burst_time"] = _compare(ours["span_s"], theirs["span_s"])
        found[other] = ratios
    return found


def _level(
    plane: ControlPlane, names: list[str], level: Level, repeats: int, seconds: float
) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    pooled: dict[str, list[float]] = {name: [] for name in names}
    seen: dict[str, dict[str, Histogram]] = {
        name: {key: Histogram() for key in HISTOGRAMS} for name in names
    }
    for repeat in range(repeats):
        for name in rounds.rotated(names, repeat):
            summary, latencies, histograms = _run(plane, name, level, seconds)
            runs[name].append(summary)
            pooled[name] += latencies
            seen[name] = {key: seen[name][key].plus(h) for key, h in histograms.items()}
    return level_result(level, runs, pooled, seen)


def added_latency(
    workdir: Path,
    policies: PolicySet,
    *,
    rates: tuple[int, ...] = (20, 100),
    bursts: tuple[int, ...] = (300, 500),
    repeats: int = 4,
    seconds: float = 15,
    workers: int = 2,
    threads: int = 8,
) -> dict[str, Any]:
    """Every level for every variant, interleaved; the control plane and servers stopped at
    the end."""
    levels = [Level(False, r) for r in rates] + [Level(True, b) for b in bursts]
    with (
        controlplane.running(workdir / "control-plane") as plane,
        variants.registered(
            plane, workdir, policies, workers=workers, threads=threads
        ) as registered,
    ):
        for name in registered.names:
            connected.stream(plane, variants.namespace(name), *WARMUP)
        results: dict[str, Any] = {
            "variants": registered.names,
            "skipped": registered.skipped,
            "stored_differs_from_lwgpu": registered.differences,
            "workers": workers,
            "threads": threads,
            "repeats": repeats,
            "seconds": seconds,
            "levels": [
                _level(plane, registered.names, level, repeats, seconds) for level in levels
            ],
        }
    return results
