"""Error answers of the server as Kubernetes ``v1 Status`` bodies, for every path.

The review endpoint (``reviews``) and the Flask app (``wsgi``: probes, metrics, unknown
paths) answer errors through these functions, so a 4xx or 5xx reads the same whichever
served it, like any other API error in the apiserver's log.
"""

from __future__ import annotations

import logging

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

from webhook import admission

ENDPOINTS = "POST /mutate, POST /validate, GET /healthz, GET /readyz, GET /metrics"

# (HTTP status, headers, body): what a WSGI answer needs, with no framework object.
Answer = tuple[int, list[tuple[str, str]], bytes]

log = logging.getLogger(__name__)


def json_headers(body: bytes) -> list[tuple[str, str]]:
    """The headers of a JSON answer of ``body``."""
    return [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]


def status_code(exc: Exception) -> int:
    """The HTTP status an exception answers with: an HTTPException's own code, else 500."""
    # werkzeug types `code` as optional: a proxy HTTPException carries none.
    code = exc.code if isinstance(exc, HTTPException) else None
    return code or 500


def http_error(exc: HTTPException, method: str, path: str, uid: str | None) -> Answer:
    """A werkzeug error as a ``Status``; 404 and 405 say what this server does answer."""
    # Every werkzeug error class has a description; a bare subclass may not, and the
    # Status message must be a string.
    message, extra = exc.description or exc.name, []
    if isinstance(exc, NotFound):
        message = f"no endpoint {path}; this server answers {ENDPOINTS}"
    elif isinstance(exc, MethodNotAllowed):
        allowed = ", ".join(sorted(exc.valid_methods or ()))
        message = f"{method} is not allowed on {path} (allowed: {allowed})"
        extra = [("Allow", allowed)]
    return _failure(status_code(exc), message, uid, extra)


def internal_error(exc: Exception, uid: str | None) -> Answer:
    """Any other exception: logged with its traceback, answered as a 500 ``Status``."""
    log.exception("review %s failed", uid or "(no uid)", exc_info=exc)
    message = f"internal error while reviewing {uid}" if uid else "internal error"
    return _failure(500, f"{message}: {type(exc).__name__}", uid)


def _failure(
    code: int, message: str, uid: str | None, extra: list[tuple[str, str]] | None = None
) -> Answer:
    # The body is admission's Status, the one every error answer of the server carries.
    body = admission.encode(admission.errored(code, message, uid))
    return code, [*json_headers(body), *(extra or ())], body
