"""The faults table: one row per fault from the load's records, printed as Markdown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tools.reliability.load import Record


def row(
    fault: str,
    records: list[Record],
    at: list[float],
    recovery_s: float,
    ok: Callable[[Record], bool],
    **extra: Any,
) -> dict[str, Any]:
    """The table row of one fault; `at` are the moments it struck."""
    failed = [r for r in records if not ok(r)]
    in_flight = [r for r in failed if any(r.in_flight(t) for t in at)]
    # Sent on a kept-alive connection the fault had already broken, before the client saw it.
    stale = [
        r for r in failed if r not in in_flight and any(r.on_connection_from_before(t) for t in at)
    ]
    return {
        "fault": fault,
        "requests": len(records),
        "failures": len(failed),
        "failed_in_flight": len(in_flight),
        "failed_on_broken_connection": len(stale),
        "failed_otherwise": len(failed) - len(in_flight) - len(stale),
        "recovery_s": round(recovery_s, 3),
        "errors": sorted({r.error or f"HTTP {r.status} {r.profile}" for r in failed}),
        # Start and end relative to the (first) fault, to tell in-flight from later ones.
        "failed": [
            {
                "client": r.client,
                "start_s": round(r.start - at[0], 4) if at else None,
                "end_s": round(r.end - at[0], 4) if at else None,
                "new_connection": r.handshake,
                "error": r.error,
                "status": r.status,
            }
            for r in failed[:50]
        ],
        **extra,
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the form docs/RELIABILITY.md shows)."""
    columns = (
        "fault",
        "requests",
        "failures",
        "in flight",
        "on a broken connection",
        "other",
        "recovery (s)",
        "note",
    )
    lines = ["| " + " | ".join(columns) + " |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    lines += [
        f"| {r['fault']} | {r['requests']} | {r['failures']} | {r['failed_in_flight']} "
        f"| {r['failed_on_broken_connection']} | {r['failed_otherwise']} "
        f"| {r['recovery_s']:.2f} | {r['note']} |"
        for r in rows
    ]
    return "\n".join(lines)
