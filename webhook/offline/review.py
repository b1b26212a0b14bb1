"""`review`'s work: decide each input document as the webhook would, and find the admitted
pods that `--nodes` cannot place. `webhook.cli.review` reads the inputs, prints the
verdicts and turns them into an exit code.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from webhook.admission import KIND as REVIEW_KIND
from webhook.admission import BadReview, object_name, parse_request, review
from webhook.admission.types import AdmissionReview
from webhook.api.decoding import as_decoded
from webhook.api.types import PatchOperation
from webhook.api.workload import dig, group_of, template_path
from webhook.core.decision import Decision, Outcome, decide
from webhook.policy import PolicySet

from .cluster import Nodes, unschedulable
from .manifests import InputError, Manifest


class Verdict(TypedDict):
    """One reviewed document: what every output format needs."""

    where: str  # where it was found, `file#index`
    ref: str  # Kind/namespace/name, for messages
    namespace: str  # its own, or the one `--namespace` gives a manifest that names none
    policy: str | None  # the name of the policy that governs the namespace
    outcome: Outcome
    allowed: bool
    profile: str | None
    reason: str
    warnings: list[str]
    patch: list[PatchOperation]  # the webhook's JSON Patch
    source: Any  # the object as the webhook gets it (a manifest as the apiserver decodes it)
    object: Any  # the object as the apiserver stores it
    review: NotRequired[AdmissionReview]  # the server's answer, for an AdmissionReview input
    # With `--nodes`, for an admitted object with a pod spec: whether a node takes its pods.
    schedulable: NotRequired[Schedulable]


class Schedulable(TypedDict):
    """`review --nodes`' verdict on placement: `ok`, and why not (kube-scheduler's words)."""

    ok: bool
    reason: str


# Groups of files that sit beside manifests but are read by a tool, never by the apiserver.
TOOL_GROUPS = {
    "kustomize.config.k8s.io": "`kubectl kustomize DIR | lwgpu review -` reviews what it builds",
    "config.kubernetes.io": "a KRM function's configuration",
}


def left_out(doc: Manifest) -> str | None:
    """Why a document is no object for the cluster and is left out of the review (None: it
    is one): a mapping without `apiVersion` and `kind` (a Helm `values.yaml` or
    `Chart.yaml`), or a kustomize file. `kubectl apply` of review's output would fail on it."""
    body = doc.body
    if not isinstance(body, dict):
        return None  # not a mapping at all: an input error, as before
    api, kind = body.get("apiVersion"), body.get("kind")
    if not (isinstance(api, str) and api and isinstance(kind, str) and kind):
        return "no apiVersion and kind: not a Kubernetes object"
    group, slash, _ = api.partition("/")
    if slash and group in TOOL_GROUPS:
        return f"a {kind} of {api}, read by a tool, not the cluster; {TOOL_GROUPS[group]}"
    return None


def review_document(doc: Manifest, policies: PolicySet, default_ns: str) -> Verdict:
    """Decide one document (an AdmissionReview, or a manifest in namespace `default_ns` when
    it names none); raise `InputError` for a document that is neither."""
    body = doc.body
    if isinstance(body, dict) and body.get("kind") == REVIEW_KIND:
        try:
            request = parse_request(body)
        except BadReview as err:
            raise InputError(f"{doc.where}: {err}", doc.where) from None
        result = review(request, policies, "mutate")
        answer = result.response["response"]
        namespace = request.get("namespace") or ""
        return {
            "where": doc.where,
            "review": result.response,
            "allowed": answer["allowed"],
            "outcome": result.outcome,
            "source": request.get("object"),
            "object": _stored(result.decision),
            "patch": list(result.decision.patch) if "patch" in answer else [],
            "reason": result.decision.reason,
            "warnings": answer.get("warnings", []),
            "profile": result.decision.profile,
            "policy": _governing(policies, namespace),
            "ref": _ref(request["kind"]["kind"], namespace, object_name(request)),
            "namespace": namespace,
        }
    if not isinstance(body, dict):
        raise InputError(f"{doc.where}: not an object (got {type(body).__name__})", doc.where)
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


def unplaced(verdicts: list[Verdict], nodes: Nodes) -> list[Verdict]:
    """The admitted verdicts whose final pod spec no node takes (`unschedulable`); every
    admitted verdict with a pod spec gets its `schedulable`."""
    found = []
    for verdict in verdicts:
        obj = verdict["object"]
        if not (verdict["allowed"] and isinstance(obj, dict)):
            continue
        path = template_path(group_of(obj.get("apiVersion")), obj.get("kind"))
        spec = dig(obj, (*path, "spec")) if path is not None else None
        if not isinstance(spec, dict):
            continue
        reason = unschedulable(spec, nodes)
        verdict["schedulable"] = {"ok": reason is None, "reason": reason or ""}
        if reason is not None:
            found.append(verdict)
    return found
