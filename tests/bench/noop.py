"""The end-to-end floor: `webhook serve`'s gunicorn, settings and TLS, answering without deciding.

`python -m tests.bench.noop --port P --tls-cert F --tls-key F [--workers N] [--threads N]`
runs the webhook's own gunicorn application class (gthread workers, keep-alive,
the reloading TLS context, the same hooks) with a Flask app that parses each
AdmissionReview and answers "allowed" for its uid: the JSON and HTTP stack with
no decision, no logging and no metrics. Only loopback is served.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
from flask import Flask, Response, request

from webhook import DEFAULT_POLICIES
from webhook.server.gunicorn_app import ServeSettings, WebhookApplication


def create_app() -> Flask:
    """A Flask app that allows every review on /mutate and /validate; /healthz for start-up."""
    app = Flask("lwgpu-bench-noop")

    def allow() -> Response:
        review = orjson.loads(request.get_data())
        answer = {
            "apiVersion": review.get("apiVersion"),
            "kind": review.get("kind"),
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return Response(orjson.dumps(answer), mimetype="application/json")

    app.add_url_rule("/mutate", "mutate", allow, methods=["POST"])
    app.add_url_rule("/validate", "validate", allow, methods=["POST"])
    app.add_url_rule(
        "/healthz", "healthz", lambda: Response(b'{"status":"ok"}', mimetype="application/json")
    )
    return app


class NoopApplication(WebhookApplication):
    """The webhook's gunicorn configuration, serving `create_app()` instead of the webhook."""

    def load(self) -> Flask:
        """The no-op app (runs in each worker after the fork, like the webhook's)."""
        return create_app()


def main(argv: list[str] | None = None) -> None:
    """Serve the no-op app on 127.0.0.1 until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.noop", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-cert", type=Path, required=True)
    parser.add_argument("--tls-key", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    NoopApplication(
        ServeSettings(
            "127.0.0.1",
            args.port,
            Path(DEFAULT_POLICIES),
            args.tls_cert,
            args.tls_key,
            args.workers,
            args.threads,
        )
    ).run()


if __name__ == "__main__":
    main()
