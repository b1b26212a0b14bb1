"""`lwgpu policy check PATH...` (validate policy files offline, exit 0/1), `policy explain
NAMESPACE` (which policy governs it, and what it does there), `policy compile PATH...` (the
policy as Kubernetes admission policy objects, exit 0/1) and `policy sync` (those objects kept
in the apiserver while the policy changes: the webhook pod's sidecar, until SIGTERM)."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading

from webhook.compile import Unexpressible, final_state_check, rewrite_policy
from webhook.files import load_policies
from webhook.offline.cluster import policy_findings, with_discovered
from webhook.offline.explain import explain
from webhook.offline.yaml_output import dump_all
from webhook.policy import PolicyError

from .conventions import EXIT_FOUND, EXIT_OK, UsageError, say_error
from .options import add_nodes, add_policies, nodes_from, policies_from


def configure(parser: argparse.ArgumentParser) -> None:
    """The `policy` sub-commands: `check`, `explain`, `compile` and `sync`."""
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser(
        "check",
        help="validate policy files or directories",
        description="Validate policies together, as the server loads a directory of them; "
        "print one line per error.",
    )
    check.add_argument("paths", nargs="+", metavar="PATH")
    add_nodes(
        check,
        "warn about classes no node carries, lightweight nodes no class selects, and "
        "avoidLightweight with no other GPU node",
    )
    check.set_defaults(func=run_check)
    explained = actions.add_parser(
        "explain",
        help="say which policy governs a namespace and what it does there",
        description="Print which policy governs NAMESPACE and why (the include or exclude "
        "pattern that decided), its classes in fit order, and what happens to GPU asks.",
    )
    explained.add_argument("namespace", metavar="NAMESPACE")
    add_policies(explained)
    explained.set_defaults(func=run_explain)
    compiled = actions.add_parser(
        "compile",
        help="print the policy as admission policy objects for the apiserver",
        description="Print the final-state check of the policies, loaded together as the "
        "server loads them, as a ValidatingAdmissionPolicy and its binding, ready for "
        "`kubectl apply -f -`: the apiserver refuses a pod or workload that still asks GPU "
        "memory (the webhook was down or bypassed) or needs more GPUs than a lightweight "
        "node has; then, where the policy allows it (static classes, placement: exact), a "
        "MutatingAdmissionPolicy and its binding that rewrite in the apiserver as the webhook "
        "does (Kubernetes 1.36+). Exits 1, naming the feature, for a policy either cannot "
        "express (the check is still printed when only the rewrite cannot be).",
    )
    compiled.add_argument("paths", nargs="+", metavar="PATH")
    compiled.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="a YAML stream of the objects, or one JSON List (default: %(default)s)",
    )
    compiled.add_argument(
        "--only",
        choices=("check", "rewrite"),
        help="print only the final-state check (what the install ships) or only the rewrite",
    )
    compiled.set_defaults(func=run_compile)
    synced = actions.add_parser(
        "sync",
        help="keep the compiled final-state check in the apiserver as the policies change",
        description="Follow the policies as the server does (a load that fails keeps the "
        "last good one) and write the compiled ValidatingAdmissionPolicy and its binding "
        "into the apiserver whenever a load changes them, until SIGTERM. The webhook "
        "Deployment runs it as a sidecar. The objects must exist (the install creates them): "
        "it only patches them. Talks to the API as the pod's ServiceAccount, else as "
        "kubeconfig says.",
    )
    add_policies(synced)
    synced.set_defaults(func=run_sync)


def run_check(args: argparse.Namespace) -> int:
    """Load every path as one set; print what loaded or every error; 1 if any is invalid."""
    nodes = nodes_from(args)  # a --nodes that cannot be used is a usage error, found first
    try:
        policies = load_policies(*args.paths)
    except PolicyError as err:
        # The report, on stdout as the `ok:` lines are: an invalid policy is what `check` finds.
        for message in err.errors:
            print(f"error: {message}")
        return EXIT_FOUND
    for policy in policies.policies:
        classes = ", ".join(f"{p.name}={p.memory_mib}Mi" for p in policy.profiles)
        placement = "; placement: spillOver" if policy.placement == "spillOver" else ""
        mode = "; mode: audit" if policy.mode == "audit" else ""
        print(f"ok: {policy.source}: policy {policy.name!r}: {classes}{placement}{mode}")
    for policy in policies.policies:
        for warning in policy.warnings:
            print(f"warning: {warning}")
    if nodes is not None:
        # What the webhook would serve: a discovering policy's classes include the nodes'.
        for finding in policy_findings(with_discovered(policies, nodes), nodes):
            print(f"warning: {finding}")
    return EXIT_OK


def run_explain(args: argparse.Namespace) -> int:
    """Print `explain` for the namespace; exit 2 when the policies do not load."""
    print("\n".join(explain(policies_from(args), args.namespace)))
    return EXIT_OK


def run_compile(args: argparse.Namespace) -> int:
    """Print the compiled objects; 1 for a feature the check or the rewrite cannot express,
    2 when the policies do not load."""
    try:
        policies = load_policies(*args.paths)
    except PolicyError as err:
        raise UsageError(f"cannot load policies:\n{err}") from None
    objects = []
    if args.only != "rewrite":
        try:
            objects += final_state_check(policies)
        except Unexpressible as err:
            say_error(args, f"cannot compile: {err}")
            return EXIT_FOUND
    code = EXIT_OK
    if args.only != "check":
        try:
            objects += rewrite_policy(policies)
        except Unexpressible as err:
            shown = "printing only the check" if objects else "nothing to print"
            say_error(args, f"cannot compile the rewrite, {shown}: {err}")
            code = EXIT_FOUND
    if args.output == "json":
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2))
    else:
        print(dump_all(objects, block_text=True), end="")
    return code


def run_sync(args: argparse.Namespace) -> int:
    """Apply the check of every good load until SIGTERM (exit 0); 2 without an API config."""
    # Imported here: the kubernetes client takes about a second and 50 MiB, which no other
    # `policy` command needs.
    from webhook.kube import admission_policies
    from webhook.kube.client import KubeConfigError, api_client
    from webhook.sync.final_state import FinalStateSync

    try:
        api = api_client()
    except KubeConfigError as err:
        raise UsageError(err) from None
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="[%(asctime)s] [%(levelname)s] %(name)s: %(message)s",
    )
    sync = FinalStateSync(
        args.policies, lambda objects: admission_policies.patch_objects(api, objects)
    )
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        sync.run(stop)
    except KeyboardInterrupt:
        pass  # Ctrl-C by hand: stop as at SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK
