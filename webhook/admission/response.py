"""Response constructors, in the style of controller-runtime's `Allowed/Denied/Patched/Errored`.

`allowed`, `denied` and `patched` build an `AdmissionResponse` (HTTP 200, the apiserver
reads `allowed`); `errored` builds the `meta/v1` Status of a request that could not be
reviewed at all (HTTP 4xx/5xx, the apiserver applies the webhook's `failurePolicy`).
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence

import orjson

from webhook.api.types import PatchOperation

from .request import API_VERSION, KIND
from .types import AdmissionResponse, AdmissionReview, Status, StatusReason

# metav1.StatusReason of each HTTP code this webhook answers with.
REASONS: dict[int, StatusReason] = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    408: "Timeout",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def allowed(uid: str, warnings: Sequence[str] = ()) -> AdmissionResponse:
    """Admit the object as it is."""
    response: AdmissionResponse = {"uid": uid, "allowed": True}
    if warnings:
        response["warnings"] = list(warnings)
    return response


def denied(uid: str, message: str) -> AdmissionResponse:
    """Refuse the object; `message` is what the kubectl user reads."""
    return {
        "uid": uid,
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": message},
    }


def patched(
    uid: str, patch: Sequence[PatchOperation], warnings: Sequence[str] = ()
) -> AdmissionResponse:
    """Admit the object after the RFC 6902 `patch` (sent base64-encoded, as the API requires)."""
    response: AdmissionResponse = {
        "uid": uid,
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": binascii.b2a_base64(orjson.dumps(patch), newline=False).decode("ascii"),
    }
    if warnings:
        response["warnings"] = list(warnings)
    return response


def errored(code: int, message: str, uid: str | None = None) -> Status:
    """A `v1 Status` failure for a request that was not reviewed; `details.uid` names it.

    The one builder of the body of every non-200 answer: the server's error answers and
    the worker's 408 for a request not received in time.
    """
    status: Status = {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": REASONS.get(code, "Unknown"),
        "message": message,
    }
    if uid:
        status["details"] = {"uid": uid}
    return status


def envelope(response: AdmissionResponse) -> AdmissionReview:
    """The AdmissionReview that carries `response` back to the apiserver."""
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def encode(document: AdmissionReview | Status) -> bytes:
    """The canonical JSON bytes of an answer; the server sends exactly these."""
    return orjson.dumps(document)
