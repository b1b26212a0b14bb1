"""Every reliability scenario, one Markdown table each: `python -m tools.reliability [--only
GROUP|GROUP:NAME ...] [--out FILE]`.

The groups, in order: `faults` (faults.py: worker faults, policy file faults, certificate
swaps and SIGTERM, on a server over loopback), `rollout` (rollout.py: rolling restart and
node drain) and `rotation` (rotation.py: certificate rotation and policy reload), both on the
real control plane, and `apiserver` (apiserver_faults.py: the API server and etcd
misbehaving under lwgpu's API clients). Each table has the same columns: the load, the
fault, failed reviews or creates, creates admitted unrewritten (reviews have no apiserver to
admit them: `-`), the recovery time and the row's note; under it, the load average (1, 5, 15
min) before and after the group. The machine is printed first. Each script still runs alone
(`python -m tools.reliability.faults` ...), with its own wider table. The rows go to
`bench-results/reliability.json` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.cluster import binaries
from tools.paths import REPO
from tools.reliability import apiserver_faults, faults, rollout, rotation
from tools.reliability.report import KINDS

OUT = REPO / "bench-results" / "reliability.json"


@dataclass(frozen=True)
class Group:
    """A script's scenarios: their names, how to run some, and what they need."""

    names: list[str]
    run: Callable[[list[str]], list[dict[str, Any]]]
    unmet: Callable[[list[str]], str | None]


def _cluster_unmet(names: list[str]) -> str | None:
    absent = binaries.missing()
    return f"not built: {', '.join(absent)}; {binaries.HOW_TO_BUILD}" if absent else None


def groups() -> dict[str, Group]:
    """The groups this checkout has, in the order they run."""
    return {
        "faults": Group(list(faults.FAULTS), faults.run, faults.unmet),
        "rollout": Group(list(rollout.SCENARIOS), rollout.run, _cluster_unmet),
        "rotation": Group(list(rotation.SCENARIOS), rotation.run, _cluster_unmet),
        "apiserver": Group(
            apiserver_faults.SCENARIOS, apiserver_faults.run, apiserver_faults.unmet
        ),
    }


def select(available: dict[str, Group], only: list[str]) -> dict[str, list[str]]:
    """The names to run per group: all, or those `--only` names (`GROUP` or `GROUP:NAME`)."""
    if not only:
        return {group: g.names for group, g in available.items()}
    chosen: dict[str, list[str]] = {}
    for item in only:
        group, _, name = item.partition(":")
        if group not in available:
            raise ValueError(f"unknown group {group!r}; choose from {', '.join(available)}")
        names = available[group].names
        if name and name not in names:
            raise ValueError(f"unknown {group} scenario {name!r}; choose from {', '.join(names)}")
        picked = chosen.setdefault(group, [])
        picked += [n for n in ([name] if name else names) if n not in picked]
    # In the groups' order, each group's names in its own order.
    return {
        group: [n for n in g.names if n in chosen[group]]
        for group, g in available.items()
        if group in chosen
    }


def cells(row: dict[str, Any]) -> list[str]:
    """A row of any group as the common columns: load, fault, failed, admitted unrewritten,
    recovery (s), note."""
    note = str(row.get("note", ""))
    failed = row.get("failed", row.get("failures", ""))
    if "creates" in row:  # through the apiserver
        load = f"{row['load']}, {row['creates']} creates"
    elif "requests" in row:  # reviews over loopback: the kinds of failure, the master
        load, failed = f"{row['requests']} reviews over loopback", row["failures"]
        kinds = [f"{row[f'failed_{kind}']} {kind}" for kind in KINDS if row[f"failed_{kind}"]]
        note = "; ".join([*kinds, f"master: {row.get('master', '')}", note])
    else:
        load = str(row.get("load", ""))
    recovery = row.get("recovery_s")  # None: the change was never seen
    return [
        load,
        str(row["fault"]),
        str(failed),
        str(row.get("unrewritten", "-")),
        "-" if recovery is None else f"{recovery:.2f}",
        note,
    ]


def table(rows: list[dict[str, Any]]) -> str:
    """One group's rows as a Markdown table of the common columns."""
    head = "| load | fault | failed | admitted unrewritten | recovery (s) | note |"
    lines = [head, "|---|---|---:|---:|---:|---|"]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> str:
    """The machine, in a line."""
    return (
        f"{platform.node()}: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def _loads(average: tuple[float, float, float]) -> str:
    return " ".join(f"{value:.2f}" for value in average)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen groups, print a table per group, write every row to the JSON file."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.reliability",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", nargs="+", default=[], metavar="GROUP[:NAME]")
    parser.add_argument("--out", type=Path, default=OUT, help="JSON file (default %(default)s)")
    args = parser.parse_args(argv)
    available = groups()
    try:
        chosen = select(available, args.only)
    except ValueError as error:
        parser.error(str(error))
    for group, names in chosen.items():
        if why := available[group].unmet(names):
            parser.error(f"{group}: {why}")
    print(f"machine: {machine()}\n")
    results = {}
    for group, names in chosen.items():
        before = os.getloadavg()
        rows = available[group].run(names)
        after = os.getloadavg()
        print(f"### {group}\n\n{table(rows)}\n")
        print(f"load average (1, 5, 15 min) before: {_loads(before)}; after: {_loads(after)}\n")
        sys.stdout.flush()
        results[group] = {"load_average_before": before, "load_average_after": after, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"machine": machine(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **results},
            indent=2,
        )
    )
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
