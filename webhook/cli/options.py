"""The options several commands share, each defined once with one help text, and the reading
of what they name: `--policies` (review, policy explain, serve), `--nodes` (review,
policy check) and `--kubeconfig`/`--context` (review --cluster, certs install and rotate).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook import DEFAULT_POLICIES
from webhook.files import load_policies
from webhook.offline.cluster import Nodes, read_nodes
from webhook.offline.manifests import InputError
from webhook.policy import PolicyError, PolicySet

from .conventions import UsageError


def add_policies(parser: argparse.ArgumentParser) -> None:
    """`--policies PATH`, the shipped policy by default."""
    parser.add_argument(
        "--policies",
        type=Path,
        default=DEFAULT_POLICIES,
        metavar="PATH",
        help="policy file or directory (default: %(default)s)",
    )


def policies_from(args: argparse.Namespace) -> PolicySet:
    """The policies `--policies` names; `UsageError` listing every error when they do not load."""
    try:
        return load_policies(args.policies)
    except PolicyError as err:
        raise UsageError(f"cannot load policies:\n{err}") from None


def add_kubeconfig(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--kubeconfig FILE` and `--context NAME`, as kubectl has them (webhook/kube/client.py:
    in a pod its ServiceAccount is used unless one of them is given)."""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: in a pod, its ServiceAccount; else $KUBECONFIG, "
        "~/.kube/config)",
    )
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")


def add_nodes(parser: argparse.ArgumentParser, does: str) -> None:
    """`--nodes FILE`: the cluster's nodes, for what the command `does` with them."""
    parser.add_argument(
        "--nodes", metavar="FILE", help=f"`kubectl get nodes -o yaml` output: {does}"
    )


def nodes_from(args: argparse.Namespace) -> Nodes | None:
    """Every node in `--nodes` (None without it); `UsageError` when unreadable."""
    if not args.nodes:
        return None
    try:
        return read_nodes(args.nodes)
    except InputError as err:
        raise UsageError(err) from None
