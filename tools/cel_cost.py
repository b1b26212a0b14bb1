"""`python -m tools.cel_cost --pod FILE [--policies PATH]`: the CEL cost of the admission
policies that `lwgpu policy compile` prints for PATH (default policies/), counted on the pod
with the code kube-apiserver runs, as Markdown tables.

The counting is tools/celcost/, a Go program on k8s.io/apiserver v0.37.2's admission CEL
compiler and cost tracking (its comment says what the apiserver limits, where). It is built
once into the git-ignored build/celcost/, again only when its sources change, with the Go
module and build caches of the control-plane build (tools/cluster/binaries.py), so a second
run costs only the evaluation. The pod is measured as sent and, when the webhook's decision
rewrites it, rewritten too: what the final-state check sees in either case. `make cel-cost`
runs it on the 100-container pod of tests/cluster/test_final_state.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tools.cluster.binaries import cache_dir
from tools.go_build import go_build
from tools.paths import REPO
from webhook.core.decision import decide
from webhook.files import load_policies

SOURCE = REPO / "tools" / "celcost"
BUILD = REPO / "build" / "celcost"
BINARY = BUILD / "celcost"
STAMP = BUILD / "sources.sha256"  # what the binary was built from
BUILD_TIMEOUT_S = 900  # cold: modules downloaded, k8s.io/kubernetes compiled


class Unavailable(Exception):
    """The Go program cannot be built here; the message says why."""


def build() -> Path:
    """The celcost binary, built unless the one in build/ is from the same sources."""
    digest = hashlib.sha256()
    for path in [SOURCE / "go.mod", SOURCE / "go.sum", *sorted(SOURCE.glob("*.go"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    if BINARY.is_file() and STAMP.is_file() and STAMP.read_text() == digest.hexdigest():
        return BINARY
    BUILD.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GOMODCACHE": str(cache_dir() / "go" / "mod"),
        "GOCACHE": str(cache_dir() / "go" / "build"),
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",
        "GOWORK": "off",
        "GOFLAGS": "-mod=readonly",  # go.mod and go.sum are committed: a build never edits them
    }
    why = go_build(SOURCE, BINARY, env, flags=("-trimpath",), timeout_s=BUILD_TIMEOUT_S)
    if why:
        raise Unavailable(why)
    STAMP.write_text(digest.hexdigest())
    return BINARY


def compiled(policies: Path) -> str:
    """The JSON List `lwgpu policy compile -o json` prints (the rewrite is left out, exit 1,
    for a policy it cannot express: the check is measured alone)."""
    command = [sys.executable, "-m", "webhook", "policy", "compile", "-o", "json"]
    done = subprocess.run(
        [*command, str(policies.resolve())],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if not done.stdout.strip():
        raise SystemExit(f"policy compile failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def pods(policies: Path, pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod as sent and, when the webhook rewrites it, as rewritten, by label."""
    namespace = pod.get("metadata", {}).get("namespace") or "default"
    rewritten = decide(pod, load_policies(policies).for_namespace(namespace)).obj
    return {"as sent": pod} | ({"rewritten": rewritten} if rewritten != pod else {})


def measure(policies: Path, pod: dict[str, Any]) -> dict[str, Any]:
    """celcost's report (see Report in tools/celcost/main.go) for these policies and pod."""
    binary = build()
    with tempfile.TemporaryDirectory(prefix="lwgpu-cel-cost-") as tmp:
        listed = Path(tmp) / "policies.json"
        listed.write_text(compiled(policies))
        args = [str(binary), str(listed)]
        for n, (label, obj) in enumerate(pods(policies, pod).items()):
            path = Path(tmp) / f"pod-{n}.json"
            path.write_text(json.dumps(obj))
            args.append(f"{label}={path}")
        done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise SystemExit(f"celcost failed ({done.returncode}): {done.stderr.strip()}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _n(value: int) -> str:
    return f"{value:,}"


def render(report: dict[str, Any]) -> str:
    """Markdown: one row per policy and pod, then each policy's expressions."""
    per_call = report["perCallLimit"]
    budget = report["runtimeCELCostBudget"]
    matching = report["runtimeCELCostBudgetMatchConditions"]
    lines = [
        f"| policy | pod | matchConditions (of {_n(matching)}) | one evaluation (of "
        f"{_n(budget)}) | costliest expression, own (of {_n(per_call)}) | outcome |",
        "|---|---|---:|---:|---|---|",
    ]
    for policy in report["policies"]:
        for pod in policy["pods"]:
            top = max(pod["expressions"], key=lambda e: e["own"])
            outcome = pod["outcome"] if len(pod["outcome"]) <= 90 else pod["outcome"][:89] + "…"
            lines.append(
                f"| {policy['kind']} {policy['name']} | {pod['pod']} "
                f"| {_n(pod['matchConditions'])} | {_n(pod['evaluation'])} "
                f"| {top['part']} {top['name']}: {_n(top['own'])} | {outcome} |"
            )
    for policy in report["policies"]:
        labels = [pod["pod"] for pod in policy["pods"]]
        lines += [
            "",
            f"{policy['kind']} {policy['name']}: each expression's own cost (what the "
            f"{_n(per_call)} per expression bounds) and with every variable it reads",
            "",
            "| expression | "
            + " | ".join(f"own, {label}" for label in labels)
            + " | "
            + " | ".join(f"with reads, {label}" for label in labels)
            + " |",
            "|---|" + "---:|" * (2 * len(labels)),
        ]
        rows = zip(*(pod["expressions"] for pod in policy["pods"]), strict=True)
        for row in rows:
            errors = sorted({e["error"] for e in row if e.get("error")})
            note = f" (error: {'; '.join(errors)[:120]})" if errors else ""
            lines.append(
                f"| {row[0]['part']} {row[0]['name']}{note} | "
                + " | ".join(_n(e["own"]) for e in row)
                + " | "
                + " | ".join(_n(e["withReads"]) for e in row)
                + " |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the tables; 2 when the Go program cannot be built."""
    parser = argparse.ArgumentParser(prog="python -m tools.cel_cost", description=__doc__)
    parser.add_argument("--policies", type=Path, default=REPO / "policies")
    parser.add_argument("--pod", type=Path, required=True, help="a v1 Pod, YAML or JSON")
    args = parser.parse_args(argv)
    try:
        report = measure(args.policies, yaml.safe_load(args.pod.read_text()))
    except Unavailable as why:
        print(f"tools.cel_cost: {why}", file=sys.stderr)
        return 2
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
