"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out: the one response builder.

The HTTP server and `webhook review --output json` both call `review`, so what
the CLI prints is exactly what the server sends.
"""

from __future__ import annotations

import binascii
from typing import Any, NamedTuple

import orjson

from .decision import Decision, decide
from .policy import Policy, PolicySet
from .quantity import shorten

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class BadReview(ValueError):
    """The body is not an AdmissionReview we can answer (HTTP 400)."""


class ReviewResult(NamedTuple):
    """The response to send, and the facts the server logs and counts (an immutable named tuple)."""

    response: dict
    uid: str
    namespace: str
    name: str
    kind: str
    operation: str
    dry_run: bool
    decision: str  # skipped | allowed | mutated | denied
    profile: str | None
    decided: Decision


def parse_request(body: Any) -> dict:
    """The `request` of a v1 AdmissionReview; raise `BadReview` for anything else.

    Each check builds its message only when it fails: this runs once per review.
    """
    if not isinstance(body, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != KIND:
        raise BadReview(
            f"body must be an AdmissionReview of apiVersion {API_VERSION}, got "
            f"apiVersion={shorten(body.get('apiVersion'))} kind={shorten(body.get('kind'))}")
    request = body.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview.request must be an object")
    uid = request.get("uid")
    if not (isinstance(uid, str) and 0 < len(uid) <= 128):
        raise BadReview("request.uid must be a string")
    kind = request.get("kind")
    if not (isinstance(kind, dict) and isinstance(kind.get("kind"), str)
            and isinstance(kind.get("group", ""), str)):
        raise BadReview("request.kind must be a GroupVersionKind")
    if request.get("operation") not in OPERATIONS:
        raise BadReview(f"request.operation must be one of {', '.join(OPERATIONS)}")
    if not isinstance(request.get("namespace", ""), (str, type(None))):
        raise BadReview("request.namespace must be a string")
    return request


def _object_name(request: dict) -> str:
    obj = request.get("object")
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    for value in (metadata.get("name"), request.get("name"), metadata.get("generateName")):
        if isinstance(value, str) and value:
            return shorten(value, 253)
    return ""


class _Governing:
    """Which policy governs a namespace, remembered for the `PolicySet` last asked about.

    Matching every policy's namespace globs costs more per review than reading the
    whole envelope; a `PolicySet` is immutable, so an answer holds until a reload
    hands over a new set. One (set, table) pair is swapped as a whole, so a thread
    never reads another set's answers.
    """

    LIMIT = 4096  # namespaces remembered; a cluster with more simply matches again

    def __init__(self) -> None:
        self._state: tuple[PolicySet | None, dict] = (None, {})

    def __call__(self, policies: PolicySet, namespace: str) -> Policy | None:
        known, table = self._state
        if known is not policies or len(table) >= self.LIMIT:
            table = {}
            self._state = (policies, table)
        if namespace not in table:
            table[namespace] = policies.for_namespace(namespace)
        return table[namespace]


_governing = _Governing()


def review(body: Any, policies: PolicySet, *, mutate: bool = True) -> ReviewResult:
    """Decide one AdmissionReview and build the AdmissionReview to answer it with.

    `mutate=False` is the validating endpoint: no patch, no warnings, and an object
    that still needs rewriting is denied (the mutating webhook did not run).
    """
    request = parse_request(body)
    namespace = request.get("namespace") or ""
    gvk = request["kind"]
    operation = request["operation"]
    if request.get("subResource"):
        decision = Decision("skipped", request.get("object"), reason="subresource")
    else:
        policy = _governing(policies, namespace) if namespace else None
        decision = decide(request.get("object"), policy, operation=operation,
                          kind=(gvk.get("group", ""), gvk["kind"]))
    response: dict[str, Any] = {"uid": request["uid"], "allowed": decision.allowed}
    outcome = decision.outcome
    if outcome == "denied":
        response["status"] = {"code": 403, "reason": "Forbidden", "message": decision.reason}
    elif mutate and outcome == "mutated":
        response["patchType"] = "JSONPatch"
        response["patch"] = binascii.b2a_base64(
            orjson.dumps(decision.patch), newline=False).decode("ascii")
    elif outcome == "mutated":
        outcome = "denied"
        response["allowed"] = False
        response["status"] = {"code": 403, "reason": "Forbidden", "message": (
            f"{gvk['kind']} still asks for GPU memory after every mutating webhook ran "
            f"({decision.warnings[0].removeprefix('lwgpu: ')}); the lwgpu mutating webhook "
            f"must rewrite it: check that it is installed and reachable")}
    if mutate and decision.warnings:
        response["warnings"] = list(decision.warnings)
    return ReviewResult(
        response={"apiVersion": API_VERSION, "kind": KIND, "response": response},
        uid=request["uid"], namespace=namespace, name=_object_name(request),
        kind=gvk["kind"], operation=operation, dry_run=request.get("dryRun") is True,
        decision=outcome, profile=decision.profile, decided=decision)


def encode(response: dict) -> bytes:
    """The canonical JSON bytes of a response; the server sends exactly these."""
    return orjson.dumps(response)
