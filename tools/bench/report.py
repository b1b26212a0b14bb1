"""Markdown tables of a benchmark result, and the issues' targets checked against it."""

from __future__ import annotations

from typing import Any

from . import report_apiserver, report_replica
from .report_e2e import end_to_end, end_to_end_targets, table

# Issue 7's in-process targets and issue 19's memory targets (its end-to-end ones are in
# report_e2e), on a 2-core machine.
TARGET_REVIEW_RATIO = 1.0
TARGET_RSS_MIB = 125.0
FLAT_PCT = 5.0
SEED_CASE = "seed pod (rewritten)"


def _kib(size: int) -> str:
    return f"{size / 1024:.1f} KiB" if size < 1 << 20 else f"{size / (1 << 20):.2f} MiB"


def inprocess(rows: list[dict[str, Any]]) -> list[str]:
    """Review vs JSON floors per case (µs)."""
    return [
        "### In-process: one review vs the JSON floor (µs)",
        "",
        *table(
            [
                "case",
                "body",
                "decision",
                "review median",
                "review p99",
                "json floor median",
                "json p99",
                "orjson floor median",
                "review / json",
                "review / orjson",
            ],
            [
                [
                    r["case"],
                    _kib(r["bytes"]),
                    r["decision"],
                    r["review"]["median_us"],
                    r["review"]["p99_us"],
                    r["json"]["median_us"],
                    r["json"]["p99_us"],
                    r["orjson"]["median_us"],
                    f"**{r['ratio_json']:.2f}×**",
                    f"{r['ratio_orjson']:.2f}×",
                ]
                for r in rows
            ],
        ),
    ]


def growth(result: dict[str, Any]) -> list[str]:
    """Cost per review by container count, slopes and the linearity check."""
    fits = result["fits"]
    lines = [
        "### Growth with containers (µs, medians)",
        "",
        *table(
            [
                "containers",
                "body",
                "review",
                "decision (review − parse)",
                "json floor",
                "orjson floor",
                "review / json",
            ],
            [
                [
                    p["containers"],
                    _kib(p["bytes"]),
                    p["review"]["median_us"],
                    p["decision"]["median_us"],
                    p["json"]["median_us"],
                    p["orjson"]["median_us"],
                    f"{p['ratio_json']:.2f}×",
                ]
                for p in result["points"]
            ],
        ),
    ]
    lines += [
        "",
        "Per-container slope (least squares) and growth exponent k ((cost(n) − cost(1)) "
        "∝ nᵏ between 64 and 256 containers; 1 = linear, 2 = quadratic):",
        "",
        *table(
            ["", "µs per container", "k"],
            [
                [name, fits[name]["us_per_container"], fits[name]["exponent"]]
                for name in ("review", "decision", "json", "orjson")
            ],
        ),
    ]
    return lines


def breakdown(result: dict[str, Any]) -> list[str]:
    """The two WSGI apps called directly, and the parts of their difference (µs)."""
    stats = result["stats"]
    return [
        "### Where the per-request difference goes: WSGI apps called directly, no gunicorn "
        "or TLS (µs, medians)",
        "",
        *table(
            ["part", "median", "p99"],
            [[name, s["median_us"], s["p99_us"]] for name, s in stats.items()],
        ),
        "",
        f"webhook app − bare WSGI app = {result['gap_us']} µs: "
        + ", ".join(f"{name} {value}" for name, value in result["parts_us"].items())
        + f". Flask's own cost (Flask no-op − bare WSGI): {result['flask_us']} µs per request.",
    ]


def memory(result: dict[str, Any]) -> list[str]:
    """RSS and PSS of master + workers at each checkpoint."""
    return [
        "### Memory of `webhook serve` (master + workers)",
        "",
        *table(
            ["reviews", "processes", "RSS total MiB", "PSS total MiB", "master RSS", "worker RSS"],
            [
                [
                    s["reviews"],
                    s["processes"],
                    s["rss_mib"],
                    s["pss_mib"],
                    s["master_rss_mib"],
                    ", ".join(str(w) for w in s["worker_rss_mib"]),
                ]
                for s in result["samples"]
            ],
        ),
        "",
        f"RSS growth from the first to the last checkpoint: {result['growth_rss_mib']} MiB "
        f"({result['growth_pct']}%).",
    ]


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each of the issue's targets that this run measured: what, the number, met or not."""
    checks = []
    seed = next((r for r in results.get("inprocess", []) if r["case"] == SEED_CASE), None)
    if seed:
        checks.append(
            {
                "target": f"review ≤ {TARGET_REVIEW_RATIO}× json floor (seed pod)",
                "measured": f"{seed['ratio_json']:.2f}×",
                "met": seed["ratio_json"] <= TARGET_REVIEW_RATIO,
            }
        )
    checks += end_to_end_targets(results.get("e2e", {}))
    checks += report_apiserver.targets(results.get("apiserver", {}))
    checks += report_replica.targets(results)
    if "growth" in results:
        k = results["growth"]["fits"]["decision"]["exponent"]
        checks.append(
            {
                "target": "linear growth with containers (decision k ≤ 1.3)",
                "measured": f"k = {k}",
                "met": results["growth"]["linear"],
            }
        )
    if "memory" in results:
        samples = results["memory"]["samples"]
        checks.append(
            {
                "target": f"RSS master + workers ≤ {TARGET_RSS_MIB:g} MiB after "
                f"{samples[1]['reviews']} reviews",
                "measured": f"{samples[1]['rss_mib']} MiB",
                "met": samples[1]["rss_mib"] <= TARGET_RSS_MIB,
            }
        )
        pct = results["memory"]["growth_pct"]
        checks.append(
            {
                "target": f"RSS flat from {samples[1]['reviews']} to {samples[-1]['reviews']} "
                f"reviews (< {FLAT_PCT:g}%)",
                "measured": f"{results['memory']['growth_rss_mib']} MiB ({pct}%)",
                "met": pct < FLAT_PCT,
            }
        )
    return checks


def _steadiness(before: dict[str, Any], after: dict[str, Any] | None) -> str:
    def text(s: dict[str, Any]) -> str:
        return (
            f"{s['loop_ms_min']}–{s['loop_ms_max']} ms (median {s['loop_ms_median']}, "
            f"spread {s['spread_pct']}%)"
        )

    return (
        "CPU steadiness (one fixed Python loop, timed 12 times): "
        + text(before)
        + " before"
        + (f", {text(after)} after" if after else "")
        + ". A large spread means a noisy "
        "machine: absolute numbers then move by as much, and a ratio of back-to-back runs "
        "by part of it (see the pair range)."
    )


def _verdict(met: bool | None) -> str:
    return "unclear" if met is None else "yes" if met else "**no**"


def render(results: dict[str, Any]) -> str:
    """The whole report as Markdown."""
    lines = [
        (
            f"Run {results['started']} · commit {results['commit']} · {results['cpus']} CPUs · "
            f"Python {results['python']} · load average {results['load_before']} before, "
            f"{results['load_after']} after"
        ),
        "",
    ]
    if "steadiness_before" in results:
        lines += [_steadiness(results["steadiness_before"], results.get("steadiness_after")), ""]
    lines += [
        "### Targets (issues 7, 19 and 30)",
        "",
        *table(
            ["target", "measured", "met"],
            [[c["target"], c["measured"], _verdict(c["met"])] for c in results["targets"]],
        ),
    ]
    for key, section in (
        ("inprocess", inprocess),
        ("growth", growth),
        ("breakdown", breakdown),
        ("e2e", end_to_end),
        ("memory", memory),
        ("apiserver", report_apiserver.section),
        ("startup", report_replica.startup),
        ("inventory", report_replica.inventory),
        ("namespaces", report_replica.namespaces),
    ):
        if key in results:
            lines += ["", *section(results[key])]
    return "\n".join(lines) + "\n"
