"""The Flask application: edge checks, then the shared decision, then the exact response bytes.

Every request to ``/mutate`` and ``/validate`` passes the same gate before any decision:
JSON content type (415), a body-size cap checked from ``Content-Length`` before a byte is
read (413), a parseable AdmissionReview (400). Errors answer with a Kubernetes ``Status``
object, so they read like any other API error in the apiserver's log; the apiserver treats
any non-200 as a failed call and applies the webhook's ``failurePolicy``.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
from flask import Flask, Response, g, request
from werkzeug.exceptions import (
    BadRequest,
    Forbidden,
    HTTPException,
    MethodNotAllowed,
    NotFound,
    RequestEntityTooLarge,
    ServiceUnavailable,
    UnsupportedMediaType,
)

from webhook import admission
from webhook.policy import PolicySet

from . import access_log, metrics
from .discovered import Discovery
from .limits import MAX_BODY_BYTES, MAX_JSON_CONTAINERS
from .policy_store import PolicyStore
from .tls import CertificateReloader

ENDPOINTS = "POST /mutate, POST /validate, GET /healthz, GET /readyz, GET /metrics"

log = logging.getLogger(__name__)


def status_body(code: int, message: str, uid: str | None = None) -> bytes:
    """The encoded ``v1 Status`` failure a non-200 answer carries."""
    return admission.encode(admission.errored(code, message, uid))


def _json_response(
    data: bytes, code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(data, status=code, headers=headers, mimetype="application/json")


def _status_code(exc: Exception) -> int:
    """The HTTP status an exception answers with: an HTTPException's own code, else 500."""
    # werkzeug types `code` as optional: a proxy HTTPException carries none (Flask sends
    # those out unchanged, so no error handler here sees one).
    code = exc.code if isinstance(exc, HTTPException) else None
    return code or 500


def read_review_body() -> object:
    """The parsed JSON body of the current request, after the edge checks."""
    if request.mimetype != "application/json":
        raise UnsupportedMediaType(
            f"Content-Type must be application/json, got {request.mimetype or 'none'!r}"
        )
    length = request.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise RequestEntityTooLarge(
            f"request body of {length} bytes exceeds the {MAX_BODY_BYTES}-byte limit"
        )
    if length is None and request.environ.get("wsgi.input_terminated"):
        # Chunked: gunicorn ends the stream after the last chunk. Reading one byte past the cap
        # tells an oversized body from one that fits (werkzeug's own cap silently truncates).
        data = request.environ["wsgi.input"].read(MAX_BODY_BYTES + 1)
        if len(data) > MAX_BODY_BYTES:
            raise RequestEntityTooLarge(
                f"chunked request body exceeds the {MAX_BODY_BYTES}-byte limit"
            )
    else:
        data = request.get_data(cache=False)
    if not data:
        raise BadRequest("request body is empty; send an AdmissionReview as JSON")
    # Counted before parsing (bytes.count runs at memory speed): see MAX_JSON_CONTAINERS.
    containers = data.count(b"{") + data.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        raise RequestEntityTooLarge(
            f"request body holds {containers} JSON objects and arrays, more than the "
            f"{MAX_JSON_CONTAINERS} an AdmissionReview from the apiserver can hold"
        )
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None


def require_client_certificate() -> None:
    """Raise 403 unless the TLS peer presented a certificate that the client CA verified.

    The context verifies optionally (probes carry no certificate), so a connection without
    one gets here with ``getpeercert()`` None; one from another CA never got past the handshake.
    """
    sock = request.environ.get("gunicorn.socket")
    if not (isinstance(sock, ssl.SSLSocket) and sock.getpeercert()):
        raise Forbidden(
            "reviews need a client certificate signed by the --client-ca of this webhook; "
            "configure one for the apiserver in its AdmissionConfiguration kubeConfigFile"
        )


def create_app(
    policies: PolicyStore,
    certificates: CertificateReloader | None = None,
    discovery: Discovery | None = None,
) -> Flask:
    """The WSGI app for one worker: it decides with ``policies.current`` (plus the classes
    ``discovery`` found, when given) and reports on ``certificates`` (None when TLS is
    terminated elsewhere, as in in-process tests).

    When ``certificates`` has a client CA, reviews require a verified client certificate."""
    app = Flask("webhook.server")
    client_ca = certificates is not None and certificates.client_ca is not None
    _route_reviews(app, policies, discovery, client_ca)
    _route_probes(app, policies, certificates)
    _route_metrics(app, certificates)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _internal_error)
    return app


def _route_reviews(
    app: Flask, policies: PolicyStore, discovery: Discovery | None, client_ca: bool
) -> None:
    reviews = _Reviews(policies, discovery, client_ca)

    @app.post("/mutate")
    def mutate() -> Response:
        return reviews.answer("mutate", mutate=True)

    @app.post("/validate")
    def validate() -> Response:
        return reviews.answer("validate", mutate=False)


@dataclass(frozen=True)
class _Reviews:
    """What ``/mutate`` and ``/validate`` share: the policy source and the client-CA switch."""

    policies: PolicyStore
    discovery: Discovery | None
    client_ca: bool

    def answer(self, endpoint: str, mutate: bool) -> Response:
        """Review the current request; count and log it, whether it is answered or raises."""
        start = time.perf_counter()
        body: object = None
        try:
            if self.client_ca:
                require_client_certificate()
            body = read_review_body()
            g.uid = admission.uid_of(body)
            result = _review(body, self.policy_set(), mutate)
            payload = admission.encode(result.response)
        except Exception as exc:
            # The error handlers write the answer; only here are the start and the body known.
            _record_failure(endpoint, _status_code(exc), start, body)
            raise
        _record_review(endpoint, start, result)
        return _json_response(payload)

    def policy_set(self) -> PolicySet:
        """The policy to decide with now; 503 until one has loaded."""
        current = self.policies.current
        if current is None:
            raise ServiceUnavailable(
                f"no policy loaded yet from {self.policies.path}: {self.policies.error}"
            )
        if self.discovery is not None:
            current = self.discovery.merged(current)
        return current


def _review(body: object, policies: PolicySet, mutate: bool) -> admission.ReviewResult:
    """The shared decision on ``body``; a malformed AdmissionReview is a 400."""
    try:
        return admission.review(body, policies, mutate=mutate)
    except admission.BadReview as exc:
        raise BadRequest(str(exc)) from None


def _record_failure(endpoint: str, code: int, start: float, body: object) -> None:
    seconds = time.perf_counter() - start
    metrics.observe_error(endpoint, code, seconds)
    access_log.write(access_log.failed(endpoint, code, seconds, body))


def _record_review(endpoint: str, start: float, result: admission.ReviewResult) -> None:
    seconds = time.perf_counter() - start
    metrics.observe_review(endpoint, result.decision, seconds)
    access_log.write(access_log.reviewed(endpoint, seconds, result))


def _route_probes(
    app: Flask, policies: PolicyStore, certificates: CertificateReloader | None
) -> None:
    @app.get("/healthz")
    def healthz() -> Response:
        return _json_response(b'{"status":"ok"}')

    @app.get("/readyz")
    def readyz() -> Response:
        problems = _readiness_problems(policies, certificates)
        if problems:
            return _json_response(orjson.dumps({"status": "not ready", "problems": problems}), 503)
        return _json_response(
            orjson.dumps({"status": "ready", "policyGeneration": policies.generation})
        )


def _readiness_problems(
    policies: PolicyStore, certificates: CertificateReloader | None
) -> list[str]:
    """Why this worker cannot answer reviews yet; empty when it can."""
    problems = []
    if policies.current is None:
        problems.append(f"no policy loaded from {policies.path}: {policies.error}")
    if certificates is not None:
        # context() rechecks the files once their interval has passed: the error is current.
        certificates.context()
        if certificates.error:
            problems.append(certificates.error)
    return problems


def _route_metrics(app: Flask, certificates: CertificateReloader | None) -> None:
    @app.get("/metrics")
    def prometheus() -> Response:
        if certificates is not None:
            # context() rechecks the files once their interval has passed: the expiry is current.
            certificates.context()
            metrics.certificate_expires(certificates.not_after)
        data, content_type = metrics.render()
        return Response(data, content_type=content_type)


def _http_error(exc: HTTPException) -> Response:
    """A werkzeug error as a ``Status``; 404 and 405 say what this server does answer."""
    # Every werkzeug error class has a description; a bare subclass may not, and the
    # Status message must be a string.
    message, headers = exc.description or exc.name, None
    if isinstance(exc, NotFound):
        message = f"no endpoint {request.path}; this server answers {ENDPOINTS}"
    elif isinstance(exc, MethodNotAllowed):
        allowed = ", ".join(sorted(exc.valid_methods or ()))
        message = f"{request.method} is not allowed on {request.path} (allowed: {allowed})"
        headers = {"Allow": allowed}
    code = _status_code(exc)
    return _json_response(status_body(code, message, g.get("uid")), code, headers)


def _internal_error(exc: Exception) -> Response:
    """Any other exception: logged with its traceback, answered as a 500 ``Status``."""
    uid = g.get("uid")
    log.exception("review %s failed", uid or "(no uid)")
    message = f"internal error while reviewing {uid}" if uid else "internal error"
    return _json_response(status_body(500, f"{message}: {type(exc).__name__}", uid), 500)
