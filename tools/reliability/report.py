"""The faults table: one row per fault from the load's records, printed as Markdown; and what
the reliability scripts share: their command line, and how they publish a table (printed,
with the load average, and as JSON)."""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.reliability.load import Record

# How a failed review failed, in the words the table uses. A timeout is a client that gave
# up after the apiserver's 5 s; a reset is a connection refused, reset or closed without an
# answer; a 5xx is the server's own error; "wrong" is any other answer (a 4xx, another class).
KINDS = ("reset", "timeout", "5xx", "wrong")


def kind_of(record: Record) -> str:
    """The kind of failure of a failed `record` (one of `KINDS`)."""
    if record.status is None:
        error = record.error or ""
        return "timeout" if "timed out" in error or "Timeout" in error else "reset"
    return "5xx" if record.status >= 500 else "wrong"


def failing_for(failed: list[Record], at: list[float]) -> float:
    """How long reviews kept failing after a fault: the longest time from a strike in `at` to
    the end of a failure that started after it and before the next strike."""
    longest = 0.0
    for record in failed:
        struck = max((t for t in at if t <= record.end), default=None)
        if struck is not None:
            longest = max(longest, record.end - struck)
    return longest


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
    kinds = collections.Counter(kind_of(r) for r in failed)
    return {
        "fault": fault,
        "requests": len(records),
        "failures": len(failed),
        **{f"failed_{kind}": kinds[kind] for kind in KINDS},
        "failed_in_flight": len(in_flight),
        "failed_on_broken_connection": len(stale),
        "failed_otherwise": len(failed) - len(in_flight) - len(stale),
        "recovery_s": round(recovery_s, 3),
        "failing_for_s": round(failing_for(failed, at), 3),
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


def command_line(
    prog: str, description: str, kind: str, names: list[str], out: Path, argv: list[str] | None
) -> tuple[argparse.ArgumentParser, list[str], Path]:
    """A script's command line, `prog [NAME...] [--out FILE]`: its parser (for further
    checks), the names of `kind` chosen (all by default, in their order) and the JSON file."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "names",
        nargs="*",
        metavar=kind.upper(),
        help=f"any of {', '.join(names)} (default: all, in that order)",
    )
    parser.add_argument("--out", type=Path, default=out, help="JSON file (default %(default)s)")
    args = parser.parse_args(argv)
    if unknown := set(args.names) - set(names):
        parser.error(f"unknown {kind} {', '.join(sorted(unknown))}; choose from {', '.join(names)}")
    return parser, args.names or names, args.out


def _loads(average: tuple[float, float, float]) -> str:
    return " ".join(f"{value:.2f}" for value in average)


def publish(
    markdown: str,
    rows: list[dict[str, Any]],
    before: tuple[float, float, float],
    out: Path,
) -> None:
    """Print a script's table and the load average (`os.getloadavg()`) from `before` to now;
    write the rows, with the machine they ran on, to the JSON file `out`."""
    after = os.getloadavg()
    print(markdown)
    print(f"\nload average (1, 5, 15 min) before: {_loads(before)}; after: {_loads(after)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "load_average_before": before,
                "load_average_after": after,
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {out}", file=sys.stderr)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the form docs/RELIABILITY.md shows)."""
    columns = (
        "fault",
        "reviews",
        "failed",
        "reset",
        "timeout",
        "5xx",
        "wrong",
        "in flight at the fault",
        "failing for (s)",
        "recovery (s)",
        "master",
        "note",
    )
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 3) + "---|---|"]
    lines += [
        f"| {r['fault']} | {r['requests']} | {r['failures']} | "
        + " | ".join(str(r[f"failed_{kind}"]) for kind in KINDS)
        + f" | {r['failed_in_flight']} | {r['failing_for_s']:.2f} | {r['recovery_s']:.2f} "
        f"| {r.get('master', '')} | {r['note']} |"
        for r in rows
    ]
    return "\n".join(lines)
