"""One AdmissionReview in, the AdmissionReview to answer it with out: the review function.

The HTTP server and `webhook review --output json` both call `review`, so what the CLI
prints is exactly what the server sends. Parsing is `request`, the decision is
`webhook.core`, the answer's shape is `response`; this module only joins them.
"""

from __future__ import annotations

from typing import NamedTuple

from webhook.core.decision import Decision, Outcome, decide
from webhook.policy import PolicySet

from . import response
from .request import object_name, parse_request
from .types import AdmissionRequest, AdmissionResponse, AdmissionReview


class ReviewResult(NamedTuple):
    """The answer to send, and the facts the server logs and counts (an immutable named tuple)."""

    response: AdmissionReview
    uid: str
    namespace: str
    name: str
    kind: str
    operation: str
    dry_run: bool
    decision: Outcome
    profile: str | None
    decided: Decision


def _decide(request: AdmissionRequest, policies: PolicySet) -> Decision:
    obj = request.get("object")
    if request.get("subResource"):
        return Decision("skipped", obj, reason="subresource")
    namespace = request.get("namespace") or ""
    gvk = request["kind"]
    policy = policies.for_namespace(namespace) if namespace else None
    return decide(
        obj,
        policy,
        operation=request["operation"],
        kind=(gvk.get("group", ""), gvk["kind"]),
        old=request.get("oldObject"),
    )


def _not_rewritten(kind: str, decision: Decision) -> str:
    """The validating webhook's refusal of an object the mutating webhook should have rewritten."""
    return (
        f"{kind} still needs the lwgpu rewrite after every mutating webhook ran "
        f"({decision.reason}); the lwgpu mutating webhook must rewrite it: check that it is "
        f"installed and reachable"
    )


def _answer(
    uid: str, kind: str, decision: Decision, mutate: bool
) -> tuple[AdmissionResponse, Outcome]:
    outcome = decision.outcome
    if outcome == "denied":
        return response.denied(uid, decision.reason), outcome
    if outcome == "mutated" and not mutate:
        return response.denied(uid, _not_rewritten(kind, decision)), "denied"
    warnings = decision.warnings if mutate else ()
    if outcome == "mutated":
        return response.patched(uid, decision.patch, warnings), outcome
    return response.allowed(uid, warnings), outcome


def review(body: object, policies: PolicySet, *, mutate: bool = True) -> ReviewResult:
    """Decide one AdmissionReview and build the AdmissionReview to answer it with.

    `mutate=False` is the validating endpoint: no patch, no warnings, and an object
    that still needs rewriting is denied (the mutating webhook did not run).
    Raises `BadReview` when `body` is not an AdmissionReview.
    """
    request = parse_request(body)
    uid, kind = request["uid"], request["kind"]["kind"]
    decision = _decide(request, policies)
    answer, outcome = _answer(uid, kind, decision, mutate)
    return ReviewResult(
        response=response.envelope(answer),
        uid=uid,
        namespace=request.get("namespace") or "",
        name=object_name(request),
        kind=kind,
        operation=request["operation"],
        dry_run=request.get("dryRun") is True,
        decision=outcome,
        profile=decision.profile,
        decided=decision,
    )
