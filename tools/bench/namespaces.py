"""Policies per namespace at scale: the shipped policy plus 1,000 team policies, each naming
one namespace exactly (docs/POLICY.md: a namespace named exactly belongs to the policy that
names it, over the shipped `*`).

- `load_s`: `webhook.files.load_policies` of the folder (parse, validate, the overlap check
  between every pair of policies), median of three;
- review cost in process (`inprocess.review_bytes`, the worker's whole work per review),
  interleaved: the seed pod in a team's namespace and in `default`, with the 1,001 policies,
  against the shipped policy alone;
- RSS/PSS of `webhook serve` (2 workers × 8 threads) serving the folder, beside one serving
  the shipped policy.
"""

from __future__ import annotations

import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from webhook import DEFAULT_POLICIES
from webhook.files import load_policies

from . import bodies, lineup, procs
from .inprocess import review_bytes
from .timing import interleaved


def write_policies(folder: Path, teams: int) -> Path:
    """The shipped policy and `teams` policies `team-<i>`, each for namespace `team-<i>`."""
    folder.mkdir(parents=True, exist_ok=True)
    shipped = yaml.safe_load(DEFAULT_POLICIES.read_text())
    (folder / "default.yaml").write_text(yaml.safe_dump(shipped))
    documents = []
    for i in range(teams):
        team = yaml.safe_load(yaml.safe_dump(shipped))
        team["metadata"]["name"] = f"team-{i}"
        team["spec"]["namespaces"] = {"include": [f"team-{i}"]}
        documents.append(team)
    (folder / "teams.yaml").write_text(yaml.safe_dump_all(documents))
    return folder


def _load_s(folder: Path) -> float:
    took = []
    for _ in range(3):
        began = time.monotonic()
        load_policies(folder)
        took.append(time.monotonic() - began)
    return round(statistics.median(took), 3)


def _memory(workdir: Path, name: str, policies: Path) -> dict[str, Any]:
    tls = workdir / "tls"
    serve = [
        "serve",
        *lineup.tls_args(tls),
        *("--policies", str(policies), "--workers", "2", "--threads", "8"),
    ]
    with procs.serving(name, "webhook", serve, tls / "ca.crt", workdir) as server:
        # One review each, so that both workers built what a review needs.
        for _ in range(4):
            server.call("POST", "/mutate", bodies.body(bodies.seed_pod()))
        return procs.memory(server.process.pid)


def namespace_policies(workdir: Path, teams: int = 1_000, budget_s: float = 6.0) -> dict[str, Any]:
    """Load time, review cost and memory with `teams` namespace policies."""
    workdir.mkdir(parents=True, exist_ok=True)
    folder = write_policies(workdir / "policies", teams)
    lineup.certificates(workdir / "tls")
    one, many = load_policies(DEFAULT_POLICIES), load_policies(folder)
    pod = bodies.seed_pod()
    last = f"team-{teams - 1}"
    in_team = bodies.body(pod, last)
    in_default = bodies.body(pod)
    reviews = interleaved(
        {
            "shipped policy, namespace default": partial(review_bytes, in_default, one),
            f"{teams + 1} policies, namespace {last}": partial(review_bytes, in_team, many),
            f"{teams + 1} policies, namespace default": partial(review_bytes, in_default, many),
        },
        budget_s=budget_s,
        max_rounds=20_000,
    )
    return {
        "teams": teams,
        "policies": len(many.policies),
        "load_s": {"shipped": _load_s(DEFAULT_POLICIES), "all": _load_s(folder)},
        "reviews": reviews,
        "memory": {
            "shipped": _memory(workdir, "webhook-shipped", DEFAULT_POLICIES),
            "all": _memory(workdir, "webhook-teams", folder),
        },
    }
