"""`python -m webhook review`: the offline dry run of the decision, for people and CI.

Exit codes: 0 every object allowed, 1 any denied, 2 unreadable input, bad policy
or usage error (message on stderr).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from webhook import DEFAULT_POLICIES
from webhook.admission import KIND as REVIEW_KIND
from webhook.admission import BadReview, review
from webhook.api.workload import dig, group_of, template_path
from webhook.core.decision import decide
from webhook.policy import PolicyError, PolicySet, load_policies

from .cluster import read_nodes, unplaceable
from .manifests import Document, InputError, read_documents
from .yaml_output import dump_all


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `review` sub-command."""
    parser = subparsers.add_parser(
        "review",
        help="dry-run the decision on manifests or AdmissionReviews",
        description="Review manifests (YAML/JSON, multi-document, kind: List) or AdmissionReviews "
        "offline with the same decision the server makes.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH|-",
        help="files or directories to read; - or nothing reads standard input",
    )
    parser.add_argument(
        "--policies",
        default=str(DEFAULT_POLICIES),
        help="policy file or directory (default: %(default)s)",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("json", "yaml", "patch"),
        help="json: verdicts (or the AdmissionReview response); yaml: the "
        "rewritten objects; patch: JSON Patch per object. Default: json "
        "for AdmissionReviews, yaml for manifests",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        default="default",
        help="namespace for manifests that name none (default: %(default)s)",
    )
    parser.add_argument(
        "--nodes",
        metavar="FILE",
        help="`kubectl get nodes -o yaml` output: exit 1 when an admitted pod's final "
        "nodeSelector and required node affinity match no node",
    )
    parser.set_defaults(func=run)


def _review_one(doc: Document, policies: PolicySet, default_ns: str) -> dict[str, Any]:
    """Decide one document; the result carries what every output format needs."""
    body = doc.body
    if isinstance(body, dict) and body.get("kind") == REVIEW_KIND:
        try:
            result = review(body, policies)
        except BadReview as err:
            raise InputError(f"{doc.where}: {err}") from None
        answer = result.response["response"]
        patch = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []
        return {
            "where": doc.where,
            "review": result.response,
            "allowed": answer["allowed"],
            "outcome": result.decision,
            "object": result.decided.obj,
            "patch": patch,
            "reason": result.decided.reason,
            "warnings": answer.get("warnings", []),
            "profile": result.profile,
            "policy": _governing(policies, result.namespace),
            "ref": f"{result.kind}/{result.namespace}/{result.name}",
        }
    if not isinstance(body, dict):
        raise InputError(f"{doc.where}: not an object (got {type(body).__name__})")
    raw_metadata = body.get("metadata")
    metadata = raw_metadata if isinstance(raw_metadata, dict) else {}
    namespace = metadata.get("namespace") or default_ns
    decision = decide(body, policies.for_namespace(str(namespace)))
    name = metadata.get("name") or metadata.get("generateName") or ""
    return {
        "where": doc.where,
        "allowed": decision.allowed,
        "outcome": decision.outcome,
        "object": decision.obj,
        "patch": list(decision.patch),
        "reason": decision.reason,
        "warnings": list(decision.warnings),
        "profile": decision.profile,
        "policy": _governing(policies, str(namespace)),
        "ref": f"{body.get('kind')}/{namespace}/{name}",
    }


def _governing(policies: PolicySet, namespace: str) -> str | None:
    policy = policies.for_namespace(namespace) if namespace else None
    return policy.name if policy else None


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "where",
        "ref",
        "policy",
        "outcome",
        "allowed",
        "profile",
        "reason",
        "warnings",
        "patch",
    )
    return {k: result[k] for k in keys}


def _print_outputs(results: list[dict[str, Any]], output: str | None) -> None:
    """Warnings and denials on stderr, then the results on stdout in the `--output` format."""
    _print_notices(results)
    fmt = output or _default_format(results)
    if fmt == "patch":
        _print_patches(results)
    elif fmt == "json":
        _print_json(results)
    else:
        _print_yaml(results)


def _print_notices(results: list[dict[str, Any]]) -> None:
    for result in results:
        for warning in result["warnings"]:
            print(f"Warning: {result['ref']}: {warning}", file=sys.stderr)
        if not result["allowed"]:
            print(f"Denied: {result['where']} {result['ref']}: {result['reason']}", file=sys.stderr)


def _default_format(results: list[dict[str, Any]]) -> str:
    """json when every input was an AdmissionReview, else yaml."""
    return "json" if results and all("review" in r for r in results) else "yaml"


def _print_patches(results: list[dict[str, Any]]) -> None:
    for result in results:
        print(json.dumps(result["patch"]))


def _print_json(results: list[dict[str, Any]]) -> None:
    out = [r["review"] if "review" in r else _verdict(r) for r in results]
    # One AdmissionReview in gives one AdmissionReview out, as the server would answer it.
    print(json.dumps(out[0] if len(out) == 1 and "review" in results[0] else out, indent=2))


def _print_yaml(results: list[dict[str, Any]]) -> None:
    # A denied manifest is left out: it would not be admitted, and its denial is on stderr.
    shown = [
        r.get("review") if "review" in r else r["object"]
        for r in results
        if r["allowed"] or "review" in r
    ]
    sys.stdout.write(dump_all(shown))


def run(args: argparse.Namespace) -> int:
    """Review every input document; print per `--output`; return 0, 1 or 2."""
    if not args.paths and sys.stdin.isatty():
        # Waiting silently on a terminal looks like a hang: stdin is read only with `-` or a pipe.
        print(
            "error: no manifests given: name files or directories, or pipe them in "
            "(kubectl get deploy -o yaml | lwgpu review -)",
            file=sys.stderr,
        )
        return 2
    try:
        policies = load_policies(args.policies)
    except PolicyError as err:
        print(f"error: cannot load policies:\n{err}", file=sys.stderr)
        return 2
    try:
        documents = read_documents(args.paths)
        results = [_review_one(doc, policies, args.namespace) for doc in documents]
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    unplaced = _unplaced(results, args.nodes) if args.nodes else []
    if unplaced is None:
        return 2
    _print_outputs(results, args.output)
    for result in unplaced:
        print(
            f"Unschedulable: {result['where']} {result['ref']}: its nodeSelector and required "
            f"node affinity match no node of {args.nodes}",
            file=sys.stderr,
        )
    return 0 if all(r["allowed"] for r in results) and not unplaced else 1


def _unplaced(results: list[dict[str, Any]], nodes_file: str) -> list[dict[str, Any]] | None:
    """The admitted results whose final pod spec matches no node; None if FILE is unreadable."""
    try:
        nodes = read_nodes(nodes_file)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return None
    unplaced = []
    for result in results:
        obj = result["object"]
        if not (result["allowed"] and isinstance(obj, dict)):
            continue
        path = template_path(group_of(obj.get("apiVersion")), obj.get("kind"))
        spec = dig(obj, (*path, "spec")) if path is not None else None
        if isinstance(spec, dict) and unplaceable(spec, nodes):
            unplaced.append(result)
    return unplaced
