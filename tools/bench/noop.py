"""The Python floors: `webhook serve`'s gunicorn, settings and TLS, answering without deciding.

`python -m tools.bench.noop --port P --tls-cert F --tls-key F [--bare [--answer F]] [--workers N]
[--threads N]` runs the webhook's own gunicorn application class (the same worker class,
keep-alive, the reloading TLS context, the same hooks) with an app that parses each
AdmissionReview and answers "allowed" for its uid: the JSON and HTTP stack with no decision,
no logging and no metrics. By default the app is Flask (the no-op); `--bare` serves a plain
WSGI function instead, the floor of anything written on this gunicorn. With `--answer F`
the bare function answers every review with the `response` in F (lwgpu's answer to the seed
pod: patch, warnings, audit annotations) under the request's uid, so that kube-apiserver does
after the call exactly what it does after lwgpu's (`variants.py`, the `floor` variant). Only
loopback is served.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

import orjson
from flask import Flask, Response, request

from webhook import DEFAULT_POLICIES
from webhook.server.master import ServeSettings, WebhookApplication

JSON_HEADERS = [("Content-Type", "application/json")]


def _allow(review: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": review.get("apiVersion"),
            "kind": review.get("kind"),
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
    )


def create_app() -> Flask:
    """A Flask app that allows every review on /mutate and /validate; /healthz for start-up."""
    app = Flask("lwgpu-bench-noop")

    def allow() -> Response:
        return Response(_allow(orjson.loads(request.get_data())), mimetype="application/json")

    app.add_url_rule("/mutate", "mutate", allow, methods=["POST"])
    app.add_url_rule("/validate", "validate", allow, methods=["POST"])
    app.add_url_rule(
        "/healthz", "healthz", lambda: Response(b'{"status":"ok"}', mimetype="application/json")
    )
    return app


def _answer(review: dict[str, Any], answer: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": review.get("apiVersion"),
            "kind": review.get("kind"),
            "response": {**answer, "uid": review["request"]["uid"]},
        }
    )


def bare_app(
    environ: WSGIEnvironment, start_response: StartResponse, answer: dict[str, Any] | None = None
) -> Iterable[bytes]:
    """The same answers as `create_app()` (or `answer` under the request's uid) from a plain
    WSGI function: no framework at all."""
    if environ["PATH_INFO"] == "/healthz":
        body = b'{"status":"ok"}'
    else:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        review = orjson.loads(environ["wsgi.input"].read(length))
        body = _allow(review) if answer is None else _answer(review, answer)
    start_response("200 OK", [*JSON_HEADERS, ("Content-Length", str(len(body)))])
    return [body]


class NoopApplication(WebhookApplication):
    """The webhook's gunicorn configuration, serving a floor app instead of the webhook."""

    bare = False
    answer: dict[str, Any] | None = None

    # gunicorn serves any WSGI callable; the webhook's own load() promises its Flask app.
    def load(self) -> WSGIApplication:  # type: ignore[override]
        """The floor app (runs in each worker after the fork, like the webhook's)."""
        if not self.bare:
            return create_app()
        return bare_app if self.answer is None else partial(bare_app, answer=self.answer)


def loopback_parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The command line every bench server of this stack takes (port, certificates, sizes)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-cert", type=Path, required=True)
    parser.add_argument("--tls-key", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    return parser


def loopback_settings(args: argparse.Namespace) -> ServeSettings:
    """`webhook serve`'s settings on 127.0.0.1 from `loopback_parser`'s arguments."""
    return ServeSettings(
        "127.0.0.1",
        args.port,
        Path(DEFAULT_POLICIES),
        args.tls_cert,
        args.tls_key,
        args.workers,
        args.threads,
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the no-op app on 127.0.0.1 until SIGTERM."""
    parser = loopback_parser("python -m tools.bench.noop", __doc__)
    parser.add_argument("--bare", action="store_true", help="plain WSGI instead of Flask")
    parser.add_argument(
        "--answer", type=Path, help="with --bare: answer this JSON `response` to every review"
    )
    args = parser.parse_args(argv)
    application = NoopApplication(loopback_settings(args))
    application.bare = args.bare
    if args.answer is not None:
        application.answer = orjson.loads(args.answer.read_bytes())
    application.run()


if __name__ == "__main__":
    main()
