"""`python -m webhook review`: the offline dry run of the decision, for people and CI.

Exit codes: 0 every object allowed, 1 any denied (or, with `--nodes`, any admitted pod
placed on no node), 2 unreadable input, bad policy or usage error (message on stderr).
With `--nodes`, the policy findings of `policy check --nodes` are warnings on stderr.
An unreadable file is reported and the others are still reviewed and printed; the exit
code is then 2.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from webhook import DEFAULT_POLICIES
from webhook.admission import KIND as REVIEW_KIND
from webhook.admission import BadReview, object_name, parse_request, review
from webhook.api.decoding import as_decoded
from webhook.api.workload import dig, group_of, template_path
from webhook.core.decision import Decision, decide
from webhook.files import load_policies
from webhook.policy import PolicyError, PolicySet

from .cluster import Nodes, policy_findings, read_nodes, unplaceable
from .manifests import InputError, Manifest, read_inputs
from .outputs import print_outputs


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `review` sub-command."""
    parser = subparsers.add_parser(
        "review",
        help="dry-run the decision on manifests or AdmissionReviews",
        description="Review manifests (YAML/JSON, multi-document, kind: List) or AdmissionReviews "
        "offline with the same decision the server makes. A manifest is reviewed as the "
        "apiserver hands it to the webhook: quantities in canonical form (3000 is 3k, 2048Mi is "
        "2Gi) and, in a Pod, each limit without a request copied to requests.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH|-",
        help="files or directories to read; - reads standard input (with no PATH, stdin is "
        "read only when it is piped)",
    )
    parser.add_argument(
        "--policies",
        default=str(DEFAULT_POLICIES),
        help="policy file or directory (default: %(default)s)",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("json", "yaml", "patch", "diff"),
        help="yaml: every admitted object as it would be stored (rewritten or unchanged; "
        "for an AdmissionReview its request.object), a '# lwgpu: denied' comment in place "
        "of each denied one; json: an array with one verdict per object (where, ref, "
        "outcome, patch...; an AdmissionReview's also holds the server's response), but an "
        "input that is exactly one AdmissionReview prints the AdmissionReview the server "
        "answers; patch: one JSON line per object with where, ref, outcome and its JSON "
        "Patch; diff: a unified diff per rewritten object, as kubectl diff shows it. "
        "Default: json for AdmissionReviews, yaml for manifests",
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
        "nodeSelector and required node affinity match no node; warn, as policy check "
        "--nodes does, about classes no node carries and lightweight nodes no class selects",
    )
    parser.set_defaults(func=run)


def _review_one(doc: Manifest, policies: PolicySet, default_ns: str) -> dict[str, Any]:
    """Decide one document; the result carries what every output format needs."""
    body = doc.body
    if isinstance(body, dict) and body.get("kind") == REVIEW_KIND:
        try:
            request = parse_request(body)
        except BadReview as err:
            raise InputError(f"{doc.where}: {err}") from None
        result = review(request, policies, "mutate")
        answer = result.response["response"]
        patch = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []
        namespace = request.get("namespace") or ""
        return {
            "where": doc.where,
            "review": result.response,
            "allowed": answer["allowed"],
            "outcome": result.outcome,
            "source": request.get("object"),
            "object": _stored(result.decision),
            "patch": patch,
            "reason": result.decision.reason,
            "warnings": answer.get("warnings", []),
            "profile": result.decision.profile,
            "policy": _governing(policies, namespace),
            "ref": _ref(request["kind"]["kind"], namespace, object_name(request)),
            "namespace": namespace,
        }
    if not isinstance(body, dict):
        raise InputError(f"{doc.where}: not an object (got {type(body).__name__})")
    raw_metadata = body.get("metadata")
    metadata = raw_metadata if isinstance(raw_metadata, dict) else {}
    namespace = metadata.get("namespace") or default_ns
    # What the server would get for this manifest: the apiserver decodes and defaults it first.
    source = as_decoded(body)
    decision = decide(source, policies.for_namespace(str(namespace)))
    name = metadata.get("name") or metadata.get("generateName") or ""
    return {
        "where": doc.where,
        "allowed": decision.allowed,
        "outcome": decision.outcome,
        "source": source,
        "object": _stored(decision),
        "patch": list(decision.patch),
        "reason": decision.reason,
        "warnings": list(decision.warnings),
        "profile": decision.profile,
        "policy": _governing(policies, str(namespace)),
        "ref": _ref(body.get("kind"), namespace, name),
        "namespace": str(namespace),
    }


def _stored(decision: Decision) -> Any:
    """The object the apiserver stores: a patched one is decoded and defaulted again
    (k8s.io/apiserver, mutating/dispatcher.go, `callAttrMutatingHook`)."""
    return as_decoded(decision.obj) if decision.outcome == "mutated" else decision.obj


def _governing(policies: PolicySet, namespace: str) -> str | None:
    policy = policies.for_namespace(namespace) if namespace else None
    return policy.name if policy else None


def _ref(kind: object, namespace: object, name: object) -> str:
    """Kind/namespace/name for messages; a missing kind or namespace is named, never None
    (a missing name stays empty: a pod template of a CI system often has none)."""
    return f"{kind or '(no kind)'}/{namespace or '(cluster)'}/{name or ''}"


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
    documents, errors = read_inputs(args.paths)
    results = []
    for doc in documents:
        try:
            results.append(_review_one(doc, policies, args.namespace))
        except InputError as err:
            errors.append(err)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    unplaced = []
    if args.nodes:
        try:
            nodes = read_nodes(args.nodes)
        except InputError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        # What `policy check --nodes` warns about; warnings only, the exit code is the pods'.
        for finding in policy_findings(policies, nodes):
            print(f"warning: {finding}", file=sys.stderr)
        unplaced = _unplaced(results, nodes)
    print_outputs(results, args.output, whole=not errors)
    for result in unplaced:
        print(
            f"Unschedulable: {result['where']} {result['ref']}: its nodeSelector and required "
            f"node affinity match no node of {args.nodes}",
            file=sys.stderr,
        )
    if errors:
        return 2
    return 0 if all(r["allowed"] for r in results) and not unplaced else 1


def _unplaced(results: list[dict[str, Any]], nodes: Nodes) -> list[dict[str, Any]]:
    """The admitted results whose final pod spec matches no node."""
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
