"""One checked request in, the answer to it out: the review between decode and encode.

Every shell answers an AdmissionReview in the three steps of controller-runtime's handler
seam (`pkg/webhook/admission`: decode the body, `Handle(ctx, Request) Response`, encode):

    request = parse_request(body)                  # `request`: checked, or BadReview (400)
    result = review(request, policies, endpoint)   # this module: decide and answer
    data = encode(result.response)                 # `response`: the exact bytes to send

The HTTP server runs them for `/mutate` and `/validate`, `lwgpu review` for AdmissionReview
files, so what the CLI prints is exactly what the server sends. The decision is
`webhook.core`; this module only joins it to the request and the answer's shape.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from webhook.core.decision import Decision, Outcome, decide
from webhook.policy import Policy, PolicySet

from . import audit, response
from .types import AdmissionRequest, AdmissionResponse, AdmissionReview

# The two webhooks of the configuration: the mutating one rewrites, the validating one
# checks after every mutating webhook ran.
Endpoint = Literal["mutate", "validate"]


class ReviewResult(NamedTuple):
    """A reviewed request: what was decided and the AdmissionReview that answers it."""

    request: AdmissionRequest
    decision: Decision
    # What the endpoint answered: the decision's outcome, except that the validating
    # endpoint denies an object the mutating one would still have rewritten.
    outcome: Outcome
    response: AdmissionReview


def review(request: AdmissionRequest, policies: PolicySet, endpoint: Endpoint) -> ReviewResult:
    """Decide one checked request and build the AdmissionReview to answer it with.

    The `validate` endpoint answers without a patch or warnings, and denies an object that
    still needs rewriting (the mutating webhook did not run). Both carry the audit
    annotations (`audit`).
    """
    policy = _policy(request, policies)
    decision = _decide(request, policy)
    answer, outcome = _answer(request, decision, endpoint)
    answer["auditAnnotations"] = audit.annotations_of(decision, outcome, policy)
    return ReviewResult(request, decision, outcome, response.envelope(answer))


def _policy(request: AdmissionRequest, policies: PolicySet) -> Policy | None:
    """The policy that governs the request's namespace; None for a cluster-scoped object."""
    namespace = request.get("namespace") or ""
    return policies.for_namespace(namespace) if namespace else None


def _decide(request: AdmissionRequest, policy: Policy | None) -> Decision:
    obj = request.get("object")
    if request.get("subResource"):
        return Decision("skipped", obj, reason="subresource")
    gvk = request["kind"]
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
    request: AdmissionRequest, decision: Decision, endpoint: Endpoint
) -> tuple[AdmissionResponse, Outcome]:
    uid, outcome, mutate = request["uid"], decision.outcome, endpoint == "mutate"
    if outcome == "denied":
        return response.denied(uid, decision.reason), outcome
    if outcome == "mutated" and not mutate:
        return response.denied(uid, _not_rewritten(request["kind"]["kind"], decision)), "denied"
    warnings = decision.warnings if mutate else ()
    if outcome == "mutated":
        return response.patched(uid, decision.patch, warnings), outcome
    return response.allowed(uid, warnings), outcome
