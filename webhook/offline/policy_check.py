"""`python -m webhook policy check PATH...`: validate policy files offline (exit 0/1)."""

from __future__ import annotations

import argparse

from webhook.policy import PolicyError, load_policies


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `policy` sub-command group."""
    parser = subparsers.add_parser("policy", help="work with policy files")
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser(
        "check",
        help="validate policy files or directories",
        description="Validate policies; print one line per error.",
    )
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Load each path; print what loaded or every error; 1 if any path is invalid."""
    failed = False
    for path in args.paths:
        try:
            policies = load_policies(path)
        except PolicyError as err:
            failed = True
            for message in err.errors:
                print(f"error: {message}")
            continue
        for policy in policies.policies:
            classes = ", ".join(f"{p.name}={p.memory_mib}Mi" for p in policy.profiles)
            print(f"ok: {policy.source}: policy {policy.name!r}: {classes}")
    return 1 if failed else 0
