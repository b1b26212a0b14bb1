"""AdmissionReview (admission.k8s.io/v1): typed shapes, request parsing, response constructors.

`handler.review` is the seam every shell calls: the HTTP server for `/mutate` and
`/validate`, and the offline `review` command for AdmissionReview files.

Imports: `webhook.core`, `webhook.policy`, `webhook.api`, the standard library and
`orjson`. Never flask, werkzeug, gunicorn, kubernetes, pynvml or prometheus_client.
"""

from .handler import ReviewResult, review
from .request import (
    API_VERSION,
    KIND,
    BadReview,
    object_name,
    parse_request,
    request_of,
    uid_of,
)
from .response import allowed, denied, encode, envelope, errored, patched

__all__ = [
    "API_VERSION",
    "KIND",
    "BadReview",
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
    "uid_of",
]
