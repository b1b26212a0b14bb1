"""`lwgpu review`: the offline dry run of the decision, for people and CI.

Exit codes: 0 every object allowed, 1 any denied (or, with `--nodes`, any admitted pod
placed on no node; with `--exit-code`, any object rewritten), 2 unreadable input, bad
policy or usage error (message on stderr). A document that is no Kubernetes object (a Helm
`values.yaml`, a `kustomization.yaml` in a reviewed directory) is left out, with a warning.
With `--nodes`, the policy findings of `policy check --nodes` are warnings on stderr.
An unreadable file is reported and the others are still reviewed and printed; the exit
code is then 2.
"""

from __future__ import annotations

import argparse
import sys

from webhook.offline.cluster import policy_findings
from webhook.offline.junit import Report
from webhook.offline.manifests import InputError, read_inputs
from webhook.offline.outputs import print_outputs
from webhook.offline.review import Verdict, left_out, review_document, unplaced

from .conventions import EXIT_FOUND, EXIT_OK, EXIT_USAGE, UsageError, say_error
from .options import add_nodes, add_policies, nodes_from, policies_from


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
        "XML for CI test reports, a testsuite per file, a testcase per object, a failure per "
        "denied one. Default: json for AdmissionReviews, yaml for manifests",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        default="default",
        help="namespace for manifests that name none (default: %(default)s)",
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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Review every input document; print per `--output`; return 0, 1 or 2."""
    if not args.paths and sys.stdin.isatty():
        # Waiting silently on a terminal looks like a hang: stdin is read only with `-` or a pipe.
        raise UsageError(
            "no manifests given: name files or directories, or pipe them in "
            "(kubectl get deploy -o yaml | lwgpu review -)"
        )
    policies = policies_from(args)
    documents, errors = read_inputs(args.paths)
    verdicts: list[Verdict] = []
    left: list[tuple[str, str]] = []
    for doc in documents:
        reason = left_out(doc)
        if reason:
            print(f"warning: {doc.where}: left out: {reason}", file=sys.stderr)
            left.append((doc.where, reason))
            continue
        try:
            verdicts.append(review_document(doc, policies, args.namespace))
        except InputError as err:
            errors.append(err)
    for error in errors:
        say_error(args, error)
    nodes = nodes_from(args)
    unplaceable: list[Verdict] = []
    findings: list[str] = []
    if nodes is not None:
        # What `policy check --nodes` warns about; warnings only, the exit code is the pods'.
        findings = policy_findings(policies, nodes)
        for finding in findings:
            print(f"warning: {finding}", file=sys.stderr)
        unplaceable = unplaced(verdicts, nodes)
    report = Report(errors, left, unplaceable, args.nodes or "", findings, args.exit_code)
    print_outputs(verdicts, args.output, whole=not errors, report=report)
    for verdict in unplaceable:
        print(
            f"Unschedulable: {verdict['where']} {verdict['ref']}: its nodeSelector and required "
            f"node affinity match no node of {args.nodes}",
            file=sys.stderr,
        )
    if errors:
        return EXIT_USAGE
    changed = args.exit_code and any(v["outcome"] == "mutated" for v in verdicts)
    found = unplaceable or changed or not all(v["allowed"] for v in verdicts)
    return EXIT_FOUND if found else EXIT_OK
