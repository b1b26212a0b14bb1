"""`lwgpu review`: the offline dry run of the decision, for people and CI, on files or, with
`--cluster`, on the workloads a cluster stores (read with get and list only).

Exit codes: 0 every object allowed, 1 any denied (or, with `--nodes` or `--cluster`, any
admitted pod placed on no node; with `--exit-code`, any object rewritten), 2 unreadable
input, bad policy, a cluster that cannot be read or usage error (message on stderr). A
document that is no Kubernetes object (a Helm `values.yaml`, a `kustomization.yaml` in a
reviewed directory) is left out, with a warning. With `--nodes` or `--cluster`, the policy
findings of `policy check --nodes` are warnings on stderr. An unreadable file is reported
and the others are still reviewed and printed; the exit code is then 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.files import unreadable
from webhook.offline.cluster import Nodes, policy_findings, with_discovered
from webhook.offline.junit import Report
from webhook.offline.manifests import InputError, Manifest, read_inputs
from webhook.offline.outputs import print_outputs
from webhook.offline.review import Verdict, left_out, review_document, unplaced
from webhook.policy import PolicySet

from .conventions import EXIT_FOUND, EXIT_OK, EXIT_USAGE, UsageError, say_error
from .options import add_kubeconfig, add_nodes, add_policies, nodes_from, policies_from

# Where `--cluster` found the nodes, in messages.
CLUSTER_NODES = "the cluster"
# What the review of a cluster needs, said where a request is refused.
GRANT = (
    "review --cluster needs get and list on the workloads of the namespace (the built-in "
    "ClusterRole view grants them: kubectl create rolebinding NAME --clusterrole=view ...)"
)


def configure(parser: argparse.ArgumentParser) -> None:
    """The `review` arguments."""
    parser.description = (
        "Review manifests (YAML/JSON, multi-document, kind: List) or AdmissionReviews "
        "offline with the same decision the server makes. A manifest is reviewed as the "
        "apiserver hands it to the webhook: quantities in canonical form (3000 is 3k, 2048Mi is "
        "2Gi) and, in a Pod, each limit without a request copied to requests."
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH|-",
        help="files or directories to read; - reads standard input (with no PATH, stdin is "
        "read only when it is piped)",
    )
    add_policies(parser)
    parser.add_argument(
        "--output",
        "-o",
        choices=("json", "yaml", "patch", "diff", "junit"),
        help="yaml: every admitted object as it would be stored (rewritten or unchanged; "
        "for an AdmissionReview its request.object), a '# lwgpu: denied' comment in place "
        "of each denied one; json: an array with one verdict per object (where, ref, "
        "outcome, patch...; an AdmissionReview's also holds the server's response), but an "
        "input that is exactly one AdmissionReview prints the AdmissionReview the server "
        "answers; patch: one JSON line per object with where, ref, outcome and its JSON "
        "Patch; diff: a unified diff per rewritten object, as kubectl diff shows it; junit: JUnit "
        "XML for CI test reports, a testsuite per file (per namespace with --cluster), a "
        "testcase per object, a failure per denied one. Default: json for AdmissionReviews, "
        "yaml for manifests",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        help="namespace for manifests that name none (default: default); with --cluster, "
        "the namespace to review (default: the kubeconfig context's)",
    )
    parser.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 also when an object would be rewritten, as kubectl diff does",
    )
    add_nodes(
        parser,
        "exit 1 when an admitted pod's final nodeSelector and required node affinity match "
        "no node; warn, as policy check --nodes does, about classes no node carries and "
        "lightweight nodes no class selects",
    )
    live = parser.add_argument_group("the live cluster (read-only: get and list)")
    live.add_argument(
        "--cluster",
        action="store_true",
        help="review the workloads the cluster stores instead of files (Deployments, "
        "StatefulSets, DaemonSets, CronJobs, ReplicaSets and Jobs no reviewed workload owns, "
        "standalone Pods) as the webhook would decide them when their pod template is next "
        "written, and check the policies against the cluster's Nodes as --nodes does",
    )
    add_kubeconfig(live)
    live.add_argument("--all-namespaces", "-A", action="store_true", help="review every namespace")
    live.add_argument(
        "--chunk-size",
        type=int,
        metavar="N",
        help="objects per list request, as kubectl's --chunk-size (default: 500)",
    )
    parser.set_defaults(func=run)


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse combinations that cannot mean what they say."""
    live = [
        flag
        for flag, given in (
            ("--kubeconfig", args.kubeconfig),
            ("--context", args.context),
            ("--all-namespaces", args.all_namespaces),
            ("--chunk-size", args.chunk_size is not None),
        )
        if given
    ]
    if live and not args.cluster:
        raise UsageError(f"{', '.join(live)} only go with --cluster")
    if not args.cluster:
        return
    if args.paths:
        raise UsageError("--cluster reviews the cluster's workloads: name no files with it")
    if args.nodes:
        raise UsageError("--cluster checks the cluster's own Nodes: --nodes FILE is for files")
    if args.all_namespaces and args.namespace:
        raise UsageError("--namespace and --all-namespaces exclude each other")
    if args.chunk_size is not None and args.chunk_size < 1:
        raise UsageError("--chunk-size must be 1 or more")


def run(args: argparse.Namespace) -> int:
    """Review every input document; print per `--output`; return 0, 1 or 2."""
    _check_flags(args)
    policies = policies_from(args)
    errors: list[InputError] = []
    if args.cluster:
        documents, nodes, policies = _from_cluster(args, policies)
        where_nodes = CLUSTER_NODES
    else:
        if not args.paths and sys.stdin.isatty():
            # Waiting silently on a terminal looks like a hang: stdin is read only with `-`
            # or a pipe.
            raise UsageError(
                "no manifests given: name files or directories, or pipe them in "
                "(kubectl get deploy -o yaml | lwgpu review -)"
            )
        documents, errors = read_inputs(args.paths)
        nodes, where_nodes = nodes_from(args), args.nodes
        if nodes is not None:
            # Reviewed as the webhook would: with the classes a discovering policy finds there.
            policies = with_discovered(policies, nodes)
    verdicts: list[Verdict] = []
    left: list[tuple[str, str]] = []
    for doc in documents:
        reason = left_out(doc)
        if reason:
            print(f"warning: {doc.where}: left out: {reason}", file=sys.stderr)
            left.append((doc.where, reason))
            continue
        try:
            verdicts.append(review_document(doc, policies, args.namespace or "default"))
        except InputError as err:
            errors.append(err)
    for error in errors:
        say_error(args, error)
    unplaceable: list[Verdict] = []
    findings: list[str] = []
    if nodes is not None:
        # What `policy check --nodes` warns about; warnings only, the exit code is the pods'.
        findings = policy_findings(policies, nodes)
        for finding in findings:
            print(f"warning: {finding}", file=sys.stderr)
        unplaceable = unplaced(verdicts, nodes)
    report = Report(
        errors, left, unplaceable, where_nodes or "", findings, args.exit_code, args.cluster
    )
    print_outputs(verdicts, args.output, whole=not errors, report=report)
    for verdict in unplaceable:
        print(
            f"Unschedulable: {verdict['where']} {verdict['ref']}: no node of {where_nodes} "
            f"takes it: {verdict['schedulable']['reason']}",
            file=sys.stderr,
        )
    if errors:
        return EXIT_USAGE
    changed = args.exit_code and any(v["outcome"] == "mutated" for v in verdicts)
    found = unplaceable or changed or not all(v["allowed"] for v in verdicts)
    return EXIT_FOUND if found else EXIT_OK


def _from_cluster(
    args: argparse.Namespace, policies: PolicySet
) -> tuple[list[Manifest], Nodes | None, PolicySet]:
    """The cluster's workloads, its Nodes (None where it may not list them) and the
    policies with the classes discovered from those Nodes, as the installed webhook has them."""
    # Imported here: the kubernetes client takes about a second and 50 MiB, which a review of
    # files never needs.
    from webhook.kube.client import KubeConfigError, connect
    from webhook.kube.listing import PAGE, ListError
    from webhook.offline.live import live_nodes, workloads
    from webhook.scheduling import profiles_from_labels

    if args.kubeconfig:
        try:
            Path(args.kubeconfig).read_bytes()
        except OSError as err:  # the client would call any unreadable file "invalid"
            raise UsageError(unreadable(args.kubeconfig, err)) from None
    try:
        api, namespace = connect(args.kubeconfig, args.context)
    except KubeConfigError as err:
        raise UsageError(
            f"{str(err).rstrip('.')}; name one with --kubeconfig or $KUBECONFIG"
        ) from None
    scope = None if args.all_namespaces else args.namespace or namespace
    page = args.chunk_size or PAGE
    try:
        documents = workloads(api, scope, page)
        nodes = live_nodes(api, page)
    except ListError as err:
        raise UsageError(f"{err}; {_fix(err.status)}") from None
    if not documents:
        where = "any namespace" if scope is None else f"namespace {scope}"
        print(f"No workloads found in {where}.", file=sys.stderr)
    if nodes.refused:
        print(
            f"warning: {nodes.refused}; reviewed without the Nodes: no findings about them "
            "and no classes discovered from them (grant list on nodes in a ClusterRole: "
            "view grants none)",
            file=sys.stderr,
        )
        return documents, None, policies
    return (
        documents,
        nodes.nodes,
        policies.with_discovered(profiles_from_labels(nodes.stored_labels)),
    )


def _fix(status: int | None) -> str:
    """What to do about a request that failed with `status` (None: no answer)."""
    if status is None:
        return "check the server of the kubeconfig context (--kubeconfig, --context)"
    if status == 401:
        return "the credentials were not accepted: log in again or choose another --context"
    if status == 403:
        return GRANT
    return "the API server could not serve the list"
