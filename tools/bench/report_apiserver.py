"""Markdown of the creates through kube-apiserver (`apiserver.py`), and issue 30's targets."""

from __future__ import annotations

from typing import Any

from .report_e2e import table
from .variants import LABELS

# Issue 30's targets, from one interleaved run: lwgpu against the Go webhook.
TARGET_ADDED_RATIO = 1.1
TARGET_BURST_RATIO = 1.25
TARGET_RATE = "100/s"
TARGET_BURST = "burst of 300"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _apiserver(seen: dict[str, Any]) -> str:
    if not seen["count"]:
        return "—"
    return f"{_ms(seen['p50_ms'])} / {_ms(seen['p99_ms'])} ({_ms(seen['mean_ms'])})"


def _ratio(compared: dict[str, Any]) -> str:
    if compared["of_medians"] is None:
        return "— (no added latency to divide by)"
    low_high = compared["range"]
    spread = f" (rounds {low_high[0]:.2f}–{low_high[1]:.2f})" if low_high else ""
    return f"**{compared['of_medians']:.2f}×**{spread}"


def _row(name: str, row: dict[str, Any]) -> list[object]:
    added = row.get("added_median_ms", {})
    spans = [s for s in row["span_s"] if s is not None]
    return [
        LABELS.get(name, name),
        row["creates"],
        row["failed"],
        row["unrewritten"],
        _ms(row["p50_ms"]),
        _ms(row["p99_ms"]),
        _ms(row["p999_ms"]),
        _ms(added.get("p50")),
        _ms(added.get("p99")),
        ", ".join(f"{s:.2f}" for s in spans),
        _apiserver(row["apiserver"]["webhook"]),
        _apiserver(row["apiserver"]["admit"]),
    ]


def section(result: dict[str, Any]) -> list[str]:
    """One table per level; lwgpu's ratios to its floor, the Go webhook and the MAP, and the
    floor's to Go."""
    lines = [
        "### Pod creates through kube-apiserver (dry run, the seed pod)",
        "",
        f"{result['repeats']} rounds per level, variants back to back in a rotating order; "
        f"fixed rates for {result['seconds']:g} s a run, open loop; lwgpu with "
        f"{result['workers']} workers × {result['threads']} threads. Latency as the client "
        "sees it, pooled over rounds; *added* is the median over rounds of the variant's "
        "percentile less no webhook's in the same round. The apiserver's columns are its own "
        "histograms (p50 / p99 (mean), ms; quantiles interpolated within its buckets, the mean "
        "exact): each webhook call, and the whole mutating admission step.",
    ]
    differ = result.get("stored_differs_from_lwgpu", {})
    if differ:
        lines += [
            "",
            "The pod as stored, against lwgpu's: "
            + "; ".join(
                f"{LABELS[v]}: {'differs in ' + ', '.join(parts) if parts else 'the same'}"
                for v, parts in differ.items()
            )
            + " (resources, node selector, affinity, tolerations, annotations).",
        ]
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in result["skipped"].items())]
    for level in result["levels"]:
        lines += [
            "",
            f"#### {level['level']}",
            "",
            *table(
                [
                    "variant",
                    "creates",
                    "failed",
                    "unrewritten",
                    "p50 ms",
                    "p99 ms",
                    "p99.9 ms",
                    "added p50",
                    "added p99",
                    "run time s (rounds)",
                    "apiserver: webhook call",
                    "apiserver: admit step",
                ],
                [_row(name, row) for name, row in level["variants"].items()],
            ),
        ]
        for mine in ("lwgpu", "floor"):
            for other, ratios in level.get(f"{mine}_over", {}).items():
                parts = [f"{key.replace('_', ' ')} {_ratio(c)}" for key, c in ratios.items()]
                lines += ["", f"{LABELS[mine]} / {LABELS[other]}: " + "; ".join(parts) + "."]
    return lines


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 30's targets that this run measured."""
    levels = {level["level"]: level for level in result.get("levels", [])}
    checks = []
    go = levels.get(TARGET_RATE, {}).get("lwgpu_over", {}).get("go")
    for key in ("added_p50", "added_p99") if go else ():
        value = go[key]["of_medians"]
        checks.append(
            {
                "target": f"{key.replace('_', ' ')} at {TARGET_RATE} ≤ {TARGET_ADDED_RATIO}× Go's",
                "measured": "—" if value is None else f"{value:.2f}×",
                "met": None if value is None else value <= TARGET_ADDED_RATIO,
            }
        )
    burst = levels.get(TARGET_BURST, {}).get("lwgpu_over", {}).get("go")
    if burst:
        value = burst["burst_time"]["of_medians"]
        checks.append(
            {
                "target": f"{TARGET_BURST} ≤ {TARGET_BURST_RATIO}× Go's time",
                "measured": "—" if value is None else f"{value:.2f}×",
                "met": None if value is None else value <= TARGET_BURST_RATIO,
            }
        )
    if levels:
        failed = sum(
            row["failed"] + row["unrewritten"]
            for level in levels.values()
            for row in level["variants"].values()
        )
        checks.append(
            {"target": "0 failed or unrewritten creates", "measured": failed, "met": not failed}
        )
    return checks
