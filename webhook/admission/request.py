"""An untrusted body in, a checked `AdmissionRequest` out, or `BadReview` (HTTP 400)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from webhook.api.text import shorten

from .types import AdmissionRequest

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
NAME_LIMIT = 253  # a DNS subdomain, the longest object name Kubernetes accepts
# The apiserver's uids are 36-character UUIDs (k8s.io/apimachinery/pkg/util/uuid); anything
# much longer is not from an apiserver, and is never echoed back.
UID_LIMIT = 128


class BadReview(ValueError):
    """The body is not an AdmissionReview we can answer (HTTP 400)."""


def parse_request(body: object) -> AdmissionRequest:
    """The `request` of a v1 AdmissionReview; raise `BadReview` for anything else.

    Each check builds its message only when it fails: this runs once per review.
    """
    if not isinstance(body, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != KIND:
        raise BadReview(_not_a_review(body))
    request = body.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview.request must be an object")
    uid = request.get("uid")
    if not isinstance(uid, str):
        raise BadReview("request.uid must be a string")
    if not 0 < len(uid) <= UID_LIMIT:
        raise BadReview(
            f"request.uid must be 1 to {UID_LIMIT} characters long (the apiserver sends a "
            f"36-character UUID), got {len(uid)}"
        )
    kind = request.get("kind")
    if not (
        isinstance(kind, dict)
        and isinstance(kind.get("kind"), str)
        and isinstance(kind.get("group", ""), str)
    ):
        raise BadReview("request.kind must be a GroupVersionKind")
    if request.get("operation") not in OPERATIONS:
        raise BadReview(f"request.operation must be one of {', '.join(OPERATIONS)}")
    if not isinstance(request.get("namespace", ""), (str, type(None))):
        raise BadReview("request.namespace must be a string")
    return cast(AdmissionRequest, request)


def _not_a_review(body: Mapping[str, object]) -> str:
    """What the body has instead of a v1 AdmissionReview's apiVersion and kind, and the fix."""
    version, kind = body.get("apiVersion"), body.get("kind")
    has = f"{_shown('apiVersion', version)} and {_shown('kind', kind)}"
    if kind == KIND and isinstance(version, str) and version:
        # The apiserver sends the first version in the configuration's list that it speaks.
        fix = f"this webhook answers {API_VERSION} only; list just v1 in admissionReviewVersions"
    elif kind == KIND:
        fix = f"set apiVersion: {API_VERSION}"
    elif isinstance(kind, str) and kind:
        fix = (
            "send the object inside an AdmissionReview's request.object, or check a manifest "
            "offline with `lwgpu review FILE`"
        )
    else:
        fix = "send the AdmissionReview that the apiserver sends to admission webhooks"
    return (
        f"body must be an AdmissionReview (apiVersion {API_VERSION}, kind {KIND}); "
        f"it has {has}: {fix}"
    )


def _shown(field: str, value: object) -> str:
    if value is None:
        return f"no {field}"
    if not isinstance(value, str):
        return f"a non-string {field}"
    return f"{field} {shorten(value)}" if value else f'an empty {field} ("")'


def uid_of(body: object) -> str | None:
    """The request's uid, to name it in an error answer; None when it is not a usable uid."""
    uid = request_of(body).get("uid")
    return uid if isinstance(uid, str) and 0 < len(uid) <= UID_LIMIT else None


def request_of(body: object) -> Mapping[str, object]:
    """`body["request"]` when the body has one, else an empty mapping (for logging bad bodies)."""
    request = body.get("request") if isinstance(body, Mapping) else None
    return request if isinstance(request, Mapping) else {}


def text_of(mapping: object, key: str) -> str:
    """`mapping[key]` when `mapping` is a mapping and that value a string, else "".

    For reading an untrusted body, or one that failed its checks, without raising.
    """
    value = mapping.get(key) if isinstance(mapping, Mapping) else None
    return value if isinstance(value, str) else ""


def object_name(request: Mapping[str, object]) -> str:
    """`request.name`, else the object's `metadata.name`, else its `metadata.generateName`.

    The apiserver sends an empty `request.name` for objects named by `generateName` (pods
    of a ReplicaSet), so the prefix is the only name there is at admission time. Cut to
    the longest name Kubernetes accepts: the body is untrusted.
    """
    obj = request.get("object")
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = (
        text_of(request, "name") or text_of(metadata, "name") or text_of(metadata, "generateName")
    )
    return shorten(name, NAME_LIMIT)
