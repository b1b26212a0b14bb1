"""Run the benchmarks of issues 7, 19 and 30, print Markdown tables, write them as JSON.

    .venv/bin/python -m tools.bench.run                 # everything (`make bench`)
    .venv/bin/python -m tools.bench.run --quick         # shorter runs, for a smoke check
    .venv/bin/python -m tools.bench.run --only inprocess growth
    .venv/bin/python -m tools.bench.run --only e2e --against HEAD~1 --peers webhook wsgi

Parts: `inprocess` (one review vs the JSON floor), `growth` (1..256 containers),
`breakdown` (the webhook's and the no-op's WSGI apps called directly, and where the
difference goes), `e2e` (wrk against `webhook serve` and its peers, closed loop and at a
fixed rate; needs `wrk`, and `go` for the Go peers), `memory` (RSS/PSS after 10k and 50k
reviews), `apiserver` (dry-run pod creates through the real kube-apiserver, `make cluster`
first: no webhook, lwgpu, the Go webhook and the compiled MutatingAdmissionPolicy, at fixed
rates and in bursts), `startup` (seconds from start to `/readyz` 200, from the checkout
and from a read-only copy as in the image), `inventory` (5,000 and 15,000 Nodes on the
real apiserver for `discoverProfiles`), `namespaces` (1,000 policies of one namespace each).
`--against REV` adds `webhook serve` from commit REV to the lineup: one change measured
alone, side by side. Results go to `bench-results/` (git-ignored): `bench-<time>.json`,
`latest.json` and `latest.md`. Traffic goes to 127.0.0.1 only; every server and control
plane started is stopped on exit, error or Ctrl-C. Exit 0 whatever the
numbers: this reports, it does not judge.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tools.paths import REPO
from webhook import DEFAULT_POLICIES
from webhook.files import load_policies

from . import (
    apiserver,
    bodies,
    e2e,
    inprocess,
    inventory,
    lineup,
    namespaces,
    report,
    startup,
    timing,
)

PARTS = (
    "inprocess",
    "growth",
    "breakdown",
    "e2e",
    "memory",
    "apiserver",
    "startup",
    "inventory",
    "namespaces",
)
OUT = REPO / "bench-results"


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=OUT.parent,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--only", nargs="+", choices=PARTS, default=list(PARTS), help="parts to run (default: all)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="short runs (1 s in-process budgets, 3 s wrk runs, 2k/6k reviews)",
    )
    parser.add_argument(
        "--peers",
        nargs="+",
        choices=[*lineup.NAMES, *lineup.PARTS],
        default=list(lineup.NAMES),
        help="servers in the end-to-end lineup (default: all but the no-* ones, which switch a "
        "part of lwgpu off; webhook is always in)",
    )
    parser.add_argument("--against", metavar="REV", help="also run webhook serve from commit REV")
    parser.add_argument("--duration", type=float, default=5, help="seconds per wrk run")
    parser.add_argument(
        "--repeats", type=int, default=4, help="rounds of back-to-back wrk runs per level"
    )
    parser.add_argument(
        "--rate", type=int, default=200, help="offered reviews/s of the fixed-rate runs (0: none)"
    )
    parser.add_argument(
        "--rate-duration", type=float, default=15, help="seconds per fixed-rate run"
    )
    parser.add_argument("--rate-repeats", type=int, default=4, help="rounds of the fixed-rate runs")
    parser.add_argument(
        "--connections",
        type=int,
        nargs="*",
        default=[8, 64],
        help="closed-loop levels of the end-to-end runs (none: fixed rate only)",
    )
    parser.add_argument(
        "--api-rates",
        nargs="+",
        type=int,
        default=[20, 100],
        help="offered creates/s through kube-apiserver",
    )
    parser.add_argument(
        "--api-bursts",
        nargs="+",
        type=int,
        default=[300, 500],
        help="concurrent creates of each burst through kube-apiserver",
    )
    parser.add_argument(
        "--api-rounds", type=int, default=4, help="rounds of the variants through kube-apiserver"
    )
    parser.add_argument(
        "--api-seconds", type=float, default=15, help="seconds per fixed-rate run of creates"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the JSON and Markdown")
    return parser


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the chosen parts; the results as one JSON-able dict."""
    quick = args.quick
    policies = load_policies(DEFAULT_POLICIES)
    seed = bodies.body(bodies.seed_pod())
    results: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": _load(),
        "steadiness_before": timing.steadiness(),
    }
    if "inprocess" in args.only:
        results["inprocess"] = inprocess.cases(policies, budget_s=1.0 if quick else 3.0)
    if "growth" in args.only:
        results["growth"] = inprocess.growth(policies, budget_s=4.0 if quick else 12.0)
    with tempfile.TemporaryDirectory(prefix="lwgpu-bench-") as scratch:
        if "breakdown" in args.only:
            results["breakdown"] = _breakdown(Path(scratch), budget_s=2.0 if quick else 6.0)
        if "e2e" in args.only:
            results["e2e"] = e2e.end_to_end(
                Path(scratch) / "e2e",
                seed,
                policies,
                names=("webhook", *(name for name in args.peers if name != "webhook")),
                against=args.against,
                connections=tuple(args.connections),
                duration_s=3 if quick else args.duration,
                warmup_s=1,
                repeats=1 if quick else args.repeats,
                rate=args.rate,
                rate_duration_s=5 if quick else args.rate_duration,
                rate_repeats=1 if quick else args.rate_repeats,
                workers=args.workers,
                threads=args.threads,
            )
        if "memory" in args.only:
            results["memory"] = e2e.memory(
                Path(scratch) / "memory",
                seed,
                workers=args.workers,
                threads=args.threads,
                checkpoints=(2_000, 6_000) if quick else (10_000, 50_000),
            )
        if "apiserver" in args.only:
            results["apiserver"] = apiserver.added_latency(
                Path(scratch) / "apiserver",
                policies,
                rates=tuple(args.api_rates),
                bursts=tuple(args.api_bursts[:1] if quick else args.api_bursts),
                repeats=2 if quick else args.api_rounds,
                seconds=3 if quick else args.api_seconds,
                workers=args.workers,
                threads=args.threads,
            )
        if "startup" in args.only:
            results["startup"] = startup.ready_times(
                Path(scratch) / "startup",
                repeats=2 if quick else 7,
                workers=args.workers,
                threads=args.threads,
            )
        if "inventory" in args.only:
            results["inventory"] = inventory.inventory(
                Path(scratch) / "inventory",
                counts=(0, 500, 1_500) if quick else (0, 5_000, 15_000),
                events=50 if quick else 300,
            )
        if "namespaces" in args.only:
            results["namespaces"] = namespaces.namespace_policies(
                Path(scratch) / "namespaces",
                teams=200 if quick else 1_000,
                budget_s=1.0 if quick else 6.0,
            )
    results["load_after"] = _load()
    results["steadiness_after"] = timing.steadiness()
    results["targets"] = report.targets(results)
    return results


def _breakdown(scratch: Path, budget_s: float) -> dict[str, Any]:
    # A process of its own: see the docstring of tools.bench.wsgi.
    (scratch / "metrics").mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(scratch / "metrics")}
    out = scratch / "breakdown.json"
    subprocess.run(
        [sys.executable, "-m", "tools.bench.wsgi", str(out), str(budget_s)],
        cwd=OUT.parent,
        env=env,
        check=True,
        timeout=budget_s + 120,
    )
    result: dict[str, Any] = orjson.loads(out.read_bytes())
    return result


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # Turn SIGTERM into an exception so that every `finally` stops its servers.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run, print the Markdown report, write JSON and Markdown under `--out`."""
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # Ctrl-C raises KeyboardInterrupt even where the shell started us with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    results = run(args)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    text = report.render(results)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = results["started"].replace(":", "").replace("+0000", "Z")
    data = orjson.dumps(results, option=orjson.OPT_INDENT_2)
    for name in (f"bench-{stamp}.json", "latest.json"):
        (args.out / name).write_bytes(data)
    (args.out / "latest.md").write_text(text)
    print(
        f"wrote {args.out / 'latest.json'} and {args.out / 'latest.md'} ({results['elapsed_s']} s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
