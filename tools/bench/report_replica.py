"""Markdown of what a replica costs to start (`startup.py`) and of the inputs' scale
(`scale.py`)."""

from __future__ import annotations

from typing import Any

from .report_e2e import table

# Issue 30's targets for one replica (master + 2 workers) and for the Node inventory.
TARGET_REPLICA_RSS_MIB = 110.0
TARGET_READY_S = 1.5
TARGET_INVENTORY_MIB = 30.0


def startup(result: dict[str, Any]) -> list[str]:
    """Seconds from start to the first /readyz 200, per way of starting."""
    return [
        "### Start to `/readyz` 200 of `webhook serve` "
        f"({result['workers']} workers × {result['threads']} threads)",
        "",
        *table(
            ["started from", "median s", "range s", "starts"],
            [
                [
                    name,
                    v["median_s"],
                    "–".join(f"{s:.3f}" for s in v["range_s"]),
                    len(v["starts_s"]),
                ]
                for name, v in result["variants"].items()
            ],
        ),
        "",
        f"Bytecode files written into the read-only copy: {result['bytecode_written']}.",
    ]


def inventory(result: dict[str, Any]) -> list[str]:
    """The discovering webhook by the number of Nodes."""
    rows = []
    for r in result["rows"]:
        events = r.get("events")
        rows.append(
            [
                r["nodes"],
                r["created_s"],
                r["list_s"],
                r["synced_s"] if r["nodes"] else "—",
                ", ".join(str(w) for w in r["memory"]["worker_rss_mib"]),
                r["memory"]["pss_mib"],
                events["cpu_ms_per_event_per_worker"] if events else "—",
                f"{r['reviews']['median_ms']} / {r['reviews']['p99_ms']}",
            ]
        )
    return [
        "### Nodes in the inventory (`discoverProfiles: true`, the real apiserver)",
        "",
        *table(
            [
                "Nodes",
                "created in s",
                "list s",
                "healthz to synced s",
                "worker RSS MiB",
                "PSS total MiB",
                "CPU ms per watch event per worker",
                "review median / p99 ms",
            ],
            rows,
        ),
        "",
        f"Watch events: {result['events']} label changes and one new class, per count.",
    ]


def namespaces(result: dict[str, Any]) -> list[str]:
    """The shipped policy against it plus one policy per namespace."""
    memory = result["memory"]
    return [
        f"### {result['teams']:,} namespace policies ({result['policies']} in all)",
        "",
        f"Policy load: {result['load_s']['shipped']} s for the shipped policy, "
        f"{result['load_s']['all']} s for all (median of three).",
        "",
        *table(
            ["review (in process)", "median µs", "p99 µs", "n"],
            [[name, r["median_us"], r["p99_us"], r["n"]] for name, r in result["reviews"].items()],
        ),
        "",
        *table(
            ["serving", "worker RSS MiB", "RSS total MiB", "PSS total MiB"],
            [
                [
                    name,
                    ", ".join(str(w) for w in m["worker_rss_mib"]),
                    m["rss_mib"],
                    m["pss_mib"],
                ]
                for name, m in (("shipped policy", memory["shipped"]), ("all", memory["all"]))
            ],
        ),
    ]


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 30's targets for a replica's cost and the inventory that this run measured."""
    checks = []
    if "memory" in results:
        sample = results["memory"]["samples"][-1]
        checks.append(
            {
                "target": f"RSS master + workers ≤ {TARGET_REPLICA_RSS_MIB:g} MiB after "
                f"{sample['reviews']} reviews",
                "measured": f"{sample['rss_mib']} MiB",
                "met": sample["rss_mib"] <= TARGET_REPLICA_RSS_MIB,
            }
        )
    checkout = results.get("startup", {}).get("variants", {}).get("checkout")
    if checkout:
        checks.append(
            {
                "target": f"ready ≤ {TARGET_READY_S:g} s from the checkout",
                "measured": f"{checkout['median_s']} s",
                "met": checkout["median_s"] <= TARGET_READY_S,
            }
        )
    rows = results.get("inventory", {}).get("rows", [])
    if len(rows) > 1 and rows[0]["nodes"] == 0:
        first, last = rows[0], rows[-1]
        grown = max(last["memory"]["worker_rss_mib"]) - max(first["memory"]["worker_rss_mib"])
        checks.append(
            {
                "target": f"{last['nodes']:,} Nodes: worker RSS ≤ {TARGET_INVENTORY_MIB:g} MiB "
                "more than with none",
                "measured": f"+{grown:.1f} MiB",
                "met": grown <= TARGET_INVENTORY_MIB,
            }
        )
    return checks
