"""`python -m webhook policy check PATH...` (validate policy files offline, exit 0/1) and
`policy explain NAMESPACE` (which policy governs it, and what it does there)."""

from __future__ import annotations

import argparse

from webhook import DEFAULT_POLICIES
from webhook.files import load_policies
from webhook.policy import PolicyError

from .cluster import policy_findings, read_nodes
from .explain import explain
from .manifests import InputError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `policy` sub-command group."""
    parser = subparsers.add_parser("policy", help="work with policy files")
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser(
        "check",
        help="validate policy files or directories",
        description="Validate policies together, as the server loads a directory of them; "
        "print one line per error.",
    )
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument(
        "--nodes",
        metavar="FILE",
        help="`kubectl get nodes -o yaml` output: warn about classes no node carries, "
        "lightweight nodes no class selects, and avoidLightweight with no other GPU node",
    )
    check.set_defaults(func=run_check)
    explain = actions.add_parser(
        "explain",
        help="say which policy governs a namespace and what it does there",
        description="Print which policy governs NAMESPACE and why (the include or exclude "
        "pattern that decided), its classes in fit order, and what happens to GPU asks.",
    )
    explain.add_argument("namespace", metavar="NAMESPACE")
    explain.add_argument(
        "--policies",
        default=str(DEFAULT_POLICIES),
        help="policy file or directory (default: %(default)s)",
    )
    explain.set_defaults(func=run_explain)


def run_check(args: argparse.Namespace) -> int:
    """Load every path as one set; print what loaded or every error; 1 if any is invalid."""
    try:
        policies = load_policies(*args.paths)
    except PolicyError as err:
        for message in err.errors:
            print(f"error: {message}")
        return 1
    for policy in policies.policies:
        classes = ", ".join(f"{p.name}={p.memory_mib}Mi" for p in policy.profiles)
        placement = "; placement: spillOver" if policy.placement == "spillOver" else ""
        print(f"ok: {policy.source}: policy {policy.name!r}: {classes}{placement}")
    if args.nodes:
        try:
            nodes = read_nodes(args.nodes)
        except InputError as err:
            print(f"error: {err}")
            return 2
        for finding in policy_findings(policies, nodes):
            print(f"warning: {finding}")
    return 0


def run_explain(args: argparse.Namespace) -> int:
    """Print `explain` for the namespace; 1 when the policies do not load."""
    try:
        policies = load_policies(args.policies)
    except PolicyError as err:
        for message in err.errors:
            print(f"error: {message}")
        return 1
    print("\n".join(explain(policies, args.namespace)))
    return 0
