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
        description="Validate policies together, as the server loads a directory of them; "
        "print one line per error.",
    )
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.set_defaults(func=run_check)


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
        print(f"ok: {policy.source}: policy {policy.name!r}: {classes}")
    return 0
