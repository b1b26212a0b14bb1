"""The worker's WSGI app: the review endpoint mounted in front of a Flask app for the rest.

``/mutate`` and ``/validate`` go straight to ``reviews.Reviews``, a plain WSGI endpoint
(Flask's per-request machinery cost more than the decision: docs/PERFORMANCE.md). Flask
keeps everything else: the probes, ``/metrics`` and the ``Status`` answers for unknown
paths and methods, all written by ``errors`` like the review endpoint's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook.server.state.discovery import Discovery
from webhook.server.state.policy_store import PolicyStore
from webhook.server.state.tls import CertificateReloader

from . import errors, metrics
from .reviews import Reviews, endpoint_of

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


class WebhookApp(Flask):
    """Flask, with ``/mutate`` and ``/validate`` answered by ``reviews`` before Flask runs."""

    def __init__(self, reviews: Reviews) -> None:
        """A Flask app named ``webhook.server`` whose review paths go to ``reviews``."""
        super().__init__("webhook.server")
        self.reviews = reviews

    def wsgi_app(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Route the review paths to the endpoint, everything else through Flask."""
        endpoint = endpoint_of(environ.get("PATH_INFO", ""))
        if endpoint is not None:
            return self.reviews(endpoint, environ, start_response)
        return super().wsgi_app(environ, start_response)


def _json_response(
    data: bytes, code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(data, status=code, headers=headers, mimetype="application/json")


def create_app(
    policies: PolicyStore,
    certificates: CertificateReloader | None = None,
    discovery: Discovery | None = None,
) -> Flask:
    """The WSGI app for one worker: it decides with ``policies.current`` (plus the classes
    ``discovery`` found, when given) and reports on ``certificates`` (None when TLS is
    terminated elsewhere, as in in-process tests).

    When ``certificates`` has a client CA, reviews require a verified client certificate."""
    client_ca = certificates is not None and certificates.client_ca is not None
    app = WebhookApp(Reviews(policies, discovery, client_ca))
    _route_probes(app, policies, certificates)
    _route_metrics(app, certificates)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _internal_error)
    return app


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


def _answer(answer: errors.Answer) -> Response:
    code, headers, body = answer
    return Response(body, status=code, headers=headers)


def _http_error(exc: HTTPException) -> Response:
    """A werkzeug error as a ``Status`` (see ``errors.http_error``)."""
    return _answer(errors.http_error(exc, request.method, request.path, None))


def _internal_error(exc: Exception) -> Response:
    """Any other exception: logged with its traceback, answered as a 500 ``Status``."""
    return _answer(errors.internal_error(exc, None))
