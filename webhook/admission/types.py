"""Typed shapes of `admission.k8s.io/v1` AdmissionReview and `meta/v1` Status.

Field names are the Kubernetes ones (`k8s.io/api/admission/v1/types.go`); only the
fields lwgpu reads or writes are listed. These describe what a parsed, checked body
holds: `request.parse_request` is where an untrusted body becomes an `AdmissionRequest`.
"""

from typing import Any, Literal, NotRequired, TypedDict

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
StatusReason = Literal[
    "BadRequest",
    "Forbidden",
    "NotFound",
    "MethodNotAllowed",
    "Timeout",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "ServiceUnavailable",
    "Unknown",
]


class GroupVersionKind(TypedDict):
    """`request.kind`: what the apiserver says the object is (version is not read)."""

    group: NotRequired[str]
    version: NotRequired[str]
    kind: str


class AdmissionRequest(TypedDict):
    """`AdmissionReview.request` as the apiserver sends it."""

    uid: str
    kind: GroupVersionKind
    operation: Operation
    namespace: NotRequired[str | None]
    name: NotRequired[str]
    subResource: NotRequired[str]
    object: NotRequired[Any]
    oldObject: NotRequired[Any]
    dryRun: NotRequired[bool]


class ResponseStatus(TypedDict):
    """`AdmissionResponse.status`: why a review was refused (a `metav1.Status` subset)."""

    code: int
    reason: StatusReason
    message: str


class AdmissionResponse(TypedDict):
    """`AdmissionReview.response`: the answer to one request."""

    uid: str
    allowed: bool
    status: NotRequired[ResponseStatus]
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class AdmissionReview(TypedDict):
    """The envelope sent back to the apiserver."""

    apiVersion: Literal["admission.k8s.io/v1"]
    kind: Literal["AdmissionReview"]
    response: AdmissionResponse


class StatusDetails(TypedDict):
    """`Status.details`: the uid of the review a transport error answers, when it had one."""

    uid: str


class Status(TypedDict):
    """A `meta/v1` Status failure: the body of every non-200 answer."""

    apiVersion: Literal["v1"]
    kind: Literal["Status"]
    status: Literal["Failure"]
    code: int
    reason: StatusReason
    message: str
    details: NotRequired[StatusDetails]
