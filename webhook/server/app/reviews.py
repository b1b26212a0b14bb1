"""``/mutate`` and ``/validate`` as a plain WSGI endpoint: edge checks, decision, exact bytes.

Every request passes the same gate before any decision: JSON content type (415), a
body-size cap checked from ``Content-Length`` before a byte is read (413), a parseable
AdmissionReview (400). Errors answer with a Kubernetes ``Status`` (``errors``); the
apiserver treats any non-200 as a failed call and applies the webhook's ``failurePolicy``.

Why not a Flask view: Flask's own request handling (request and app contexts, URL
matching, the ``Response`` object, signals) cost more per review than the decision
itself (docs/PERFORMANCE.md). ``wsgi.create_app`` mounts this endpoint in front of the
Flask app, which keeps the probes, the metrics and the answers for every other path.
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import orjson
from werkzeug.exceptions import (
    BadRequest,
    Forbidden,
    HTTPException,
    MethodNotAllowed,
    RequestEntityTooLarge,
    ServiceUnavailable,
    UnsupportedMediaType,
)
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wsgi import get_content_length

from webhook import admission
from webhook.policy import PolicySet
from webhook.server.limits import MAX_BODY_BYTES, MAX_JSON_CONTAINERS
from webhook.server.state.discovery import Discovery
from webhook.server.state.policy_store import PolicyStore

from . import access_log, errors, metrics

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

PATHS: dict[str, admission.Endpoint] = {"/mutate": "mutate", "/validate": "validate"}
# What Flask answered for these paths before they left it: OPTIONS with an Allow header.
ALLOWED = ("OPTIONS", "POST")
_STATUS_LINES = {code: f"{code} {phrase}" for code, phrase in HTTP_STATUS_CODES.items()}


def endpoint_of(path: str) -> admission.Endpoint | None:
    """``mutate`` or ``validate`` for a path this endpoint answers, else None.

    Repeated slashes count as one, as Flask's routing (werkzeug's ``merge_slashes``) read
    them when these paths were Flask routes: ``//mutate`` is ``/mutate``.
    """
    endpoint = PATHS.get(path)
    if endpoint is None and "//" in path:
        endpoint = PATHS.get(re.sub("/{2,}", "/", path))
    return endpoint


def mimetype(environ: WSGIEnvironment) -> str:
    """The media type of the body, lowercased, without parameters (as werkzeug reads it)."""
    return str(environ.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()


def read_review_body(environ: WSGIEnvironment) -> object:
    """The parsed JSON body of the request, after the edge checks."""
    kind = mimetype(environ)
    if kind != "application/json":
        raise UnsupportedMediaType(f"Content-Type must be application/json, got {kind or 'none'!r}")
    length = get_content_length(environ)
    if length is not None and length > MAX_BODY_BYTES:
        raise RequestEntityTooLarge(
            f"request body of {length} bytes exceeds the {MAX_BODY_BYTES}-byte limit"
        )
    stream = environ["wsgi.input"]
    if length is None and environ.get("wsgi.input_terminated"):
        # Chunked: gunicorn ends the stream after the last chunk. Reading one byte past the cap
        # tells an oversized body from one that fits (werkzeug's own cap silently truncates).
        data = stream.read(MAX_BODY_BYTES + 1)
        if len(data) > MAX_BODY_BYTES:
            raise RequestEntityTooLarge(
                f"chunked request body exceeds the {MAX_BODY_BYTES}-byte limit"
            )
    else:
        # Without a length (and not chunked) there is no body to read: reading would wait.
        data = stream.read(length) if length else b""
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


def require_client_certificate(environ: WSGIEnvironment) -> None:
    """Raise 403 unless the TLS peer presented a certificate that the client CA verified.

    The context verifies optionally (probes carry no certificate), so a connection without
    one gets here with ``getpeercert()`` None; one from another CA never got past the handshake.
    """
    sock = environ.get("gunicorn.socket")
    if not (isinstance(sock, ssl.SSLSocket) and sock.getpeercert()):
        raise Forbidden(
            "reviews need a client certificate signed by the --client-ca of this webhook; "
            "configure one for the apiserver in its AdmissionConfiguration kubeConfigFile"
        )


class Reviews:
    """The endpoint of ``/mutate`` and ``/validate``: a WSGI app told which of the two it serves."""

    def __init__(self, policies: PolicyStore, discovery: Discovery | None, client_ca: bool) -> None:
        """Decide with ``policies`` (plus what ``discovery`` found); with ``client_ca``,
        require a verified client certificate."""
        self.policies = policies
        self.discovery = discovery
        self.client_ca = client_ca

    def __call__(
        self,
        endpoint: admission.Endpoint,
        environ: WSGIEnvironment,
        start_response: StartResponse,
    ) -> Iterable[bytes]:
        """Answer one request to ``endpoint`` (resolved from the path by the app, once)."""
        method = environ["REQUEST_METHOD"]
        if method == "POST":
            code, headers, body = self.answer(endpoint, environ)
        elif method == "OPTIONS":
            code, headers, body = 200, [("Allow", ", ".join(ALLOWED)), ("Content-Length", "0")], b""
        else:
            exc = MethodNotAllowed(valid_methods=ALLOWED)
            code, headers, body = errors.http_error(exc, method, environ["PATH_INFO"], None)
        start_response(_STATUS_LINES[code], headers)
        return [body]

    def answer(self, endpoint: admission.Endpoint, environ: WSGIEnvironment) -> errors.Answer:
        """Decode, review, encode; count and log the request, whether answered or failed."""
        start = time.perf_counter()
        body: object = None
        try:
            if self.client_ca:
                require_client_certificate(environ)
            body = read_review_body(environ)
            request = _checked(body)
            result = admission.review(request, self.policy_set(), endpoint)
            payload = admission.encode(result.response)
        except HTTPException as exc:
            answer = errors.http_error(exc, "POST", environ["PATH_INFO"], admission.uid_of(body))
        except Exception as exc:
            answer = errors.internal_error(exc, admission.uid_of(body))
        else:
            _record(endpoint, 200, start, request, result.outcome, result.decision.profile)
            return 200, errors.json_headers(payload), payload
        _record(endpoint, answer[0], start, admission.request_of(body), "error", None)
        return answer

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


def _checked(body: object) -> admission.AdmissionRequest:
    """The body's checked request; a malformed AdmissionReview is a 400."""
    try:
        return admission.parse_request(body)
    except admission.BadReview as exc:
        raise BadRequest(str(exc)) from None


def _record(
    endpoint: admission.Endpoint,
    status: int,
    start: float,
    request: Mapping[str, object],
    outcome: str,
    profile: str | None,
) -> None:
    """Count the request and write its access-log line (``outcome`` "error" when it failed)."""
    seconds = time.perf_counter() - start
    if status == 200:
        metrics.observe_review(endpoint, outcome, seconds)
    else:
        metrics.observe_error(endpoint, status, seconds)
    access_log.write(access_log.line(endpoint, status, seconds, request, outcome, profile))
