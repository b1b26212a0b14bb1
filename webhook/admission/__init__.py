"""AdmissionReview (admission.k8s.io/v1): typed shapes, request parsing, response constructors.

Every shell answers a body in three steps (see `handler`): `parse_request` (an untrusted
body in, a checked `AdmissionRequest` or `BadReview` out), `review` (the decision and the
AdmissionReview that answers it) and `encode` (the bytes to send). The HTTP server runs them
for `/mutate` and `/validate`, the offline `review` command for AdmissionReview files.

Imports: `webhook.core`, `webhook.policy`, `webhook.api`, the standard library and
`orjson`. Never flask, werkzeug, gunicorn, kubernetes, pynvml or prometheus_client.
"""

from .handler import Endpoint, ReviewResult, review
from .request import (
    API_VERSION,
    KIND,
    BadReview,
    object_name,
    parse_request,
    request_of,
    text_of,
    uid_of,
)
from .response import allowed, denied, encode, envelope, errored, patched
from .types import AdmissionRequest

__all__ = [
    "API_VERSION",
    "KIND",
    "AdmissionRequest",
    "BadReview",
    "Endpoint",
    "ReviewResult",
    "allowed",
    "denied",
    "encode",
    "envelope",
    "errored",
    "object_name",
    "parse_request",
    "patched",
    "request_of",
    "review",
    "text_of",
    "uid_of",
]
