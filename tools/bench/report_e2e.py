"""Markdown of the end-to-end lineup (closed loop and fixed rate), and issue 19's targets."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from . import lineup

# Issue 19's end-to-end targets, ratios from one interleaved run.
TARGET_GO_RATIO = 0.5
TARGET_CPU_RATIO = 1.2
TARGET_P99_GO_RATIO = 2.0
TARGET_P99_MS = 5.0


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def _pairs(values: list[float]) -> str:
    """The median of per-repeat ratios and their range: `0.52× (0.48–0.55)`."""
    return f"**{statistics.median(values):.2f}×** ({min(values):.2f}–{max(values):.2f})"


def _lineup_rows(
    series: dict[str, Any], columns: Callable[[dict[str, Any]], list[object]]
) -> list[list[object]]:
    rows = []
    for name, stats in series["servers"].items():
        ratios = series["ratios"].get(name)
        mine = (
            ["—", "—", "—"]
            if ratios is None
            else [_pairs(ratios[k]) for k in ("rps", "cpu", "p99")]
        )
        rows.append([lineup.label(name), *columns(stats), *mine, stats["errors"]])
    return rows


def end_to_end(result: dict[str, Any]) -> list[str]:
    """Closed loop per connection count, then the fixed rate: every server, lwgpu's ratios."""
    ratio_heads = ["lwgpu / this req/s", "lwgpu / this CPU", "lwgpu / this p99"]
    lines = [
        f"### End to end: wrk over TLS + keep-alive, closed loop, {result['workers']} workers × "
        f"{result['threads']} threads (Python servers), {result['duration_s']:g} s runs, "
        f"{result['repeats']} rounds, each round every server once, order rotating; review → "
        f"{result['decision']}",
        "",
        "Ratios are lwgpu's number over the row's, per round (runs seconds apart): the median "
        "and, in brackets, the range over the rounds. CPU is the server's worker processes' "
        "user + system time per review.",
    ]
    for level in result["levels"]:
        lines += [
            "",
            f"{level['connections']} connections:",
            "",
            *table(
                [
                    "server",
                    "req/s",
                    "CPU µs/review",
                    "p50 ms",
                    "p99 ms",
                    "busiest worker",
                    *ratio_heads,
                    "errors",
                ],
                _lineup_rows(
                    level,
                    lambda s: [
                        s["rps"],
                        f"{s['cpu_us_per_request']:g}",
                        s["p50_ms"],
                        s["p99_ms"],
                        f"{s['busiest_worker_share']:.2f}",
                    ],
                ),
            ),
        ]
    rate = result.get("rate")
    if rate:
        lines += [
            "",
            f"### Tail latency at a fixed rate: {rate['offered']} reviews/s offered over "
            f"{rate['connections']} kept-alive connections (each waits a random 0–2× its share "
            f"between requests), {rate['duration_s']:g} s × {rate['repeats']} rounds",
            "",
            *table(
                [
                    "server",
                    "req/s",
                    "CPU µs/review",
                    "p50 ms",
                    "p99 ms (range)",
                    "p99.9 ms",
                    *ratio_heads,
                    "errors",
                ],
                _lineup_rows(
                    rate,
                    lambda s: [
                        s["rps"],
                        f"{s['cpu_us_per_request']:g}",
                        s["p50_ms"],
                        f"{s['p99_ms']} ({s['p99_ms_range'][0]}–{s['p99_ms_range'][1]})",
                        s["p999_ms"],
                    ],
                ),
            ),
        ]
    if result.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in result["skipped"].items())]
    return lines


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def _ratio_check(target: str, ratios: list[float], met: Callable[[float], bool]) -> dict[str, Any]:
    """One target row: the median of one interleaved run's ratios, their range, whether met."""
    value = _median(ratios)
    measured = f"{value:.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"
    return {"target": target, "measured": measured, "met": met(value)}


def end_to_end_targets(e2e: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 19's end-to-end targets, each from ratios of one interleaved run."""
    checks = []
    for level in e2e.get("levels", []):
        ratios, at = level["ratios"], f"at {level['connections']} connections"
        if "go" in ratios:
            target = f"throughput ≥ {TARGET_GO_RATIO}× the Go webhook {at}"
            checks.append(_ratio_check(target, ratios["go"]["rps"], lambda v: v >= TARGET_GO_RATIO))
        if "wsgi" in ratios:
            target = f"worker CPU per review ≤ {TARGET_CPU_RATIO}× bare WSGI {at}"
            checks.append(
                _ratio_check(target, ratios["wsgi"]["cpu"], lambda v: v <= TARGET_CPU_RATIO)
            )
    rate = e2e.get("rate")
    if rate and "go" in rate["ratios"]:
        ours, go = rate["servers"]["webhook"]["p99_ms"], rate["servers"]["go"]["p99_ms"]
        value = _median(rate["ratios"]["go"]["p99"])
        checks.append(
            {
                "target": f"p99 at {rate['offered']}/s ≤ {TARGET_P99_GO_RATIO:g}× the Go webhook's "
                f"and ≤ {TARGET_P99_MS:g} ms",
                "measured": f"{ours} ms, {value:.2f}× Go's {go} ms",
                "met": value <= TARGET_P99_GO_RATIO and ours <= TARGET_P99_MS,
            }
        )
    return checks
