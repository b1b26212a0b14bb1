"""`webhook serve` with one part of a review switched off: its end-to-end cost, by difference.

`python -m tools.bench.parts --without PART --port P --tls-cert F --tls-key F` runs the
webhook's own gunicorn application (`WebhookApplication.load` after the fork: the policy
poller, multi-process metrics, the review endpoint, stdout as the server's) with one part
replaced in each worker:

- `access-log`: `access_log.write` does nothing (the line's fields are still gathered);
- `metrics`: `metrics.observe_review` does nothing;
- `decision`: `admission.review` runs once per endpoint and its result is reused (the body
  is still read, parsed and checked, the answer still encoded, counted and logged).

In process (`wsgi.py`) a part costs what its own code costs; in the server it also costs
what it does to the other threads of the worker (a system call that releases the GIL
hands it to another thread and has to wait to get it back). Run side by side with
`webhook` (`--peers webhook no-log ...`), the difference in CPU per review is that whole
cost. Bench only: nothing here is part of the product.
"""

from __future__ import annotations

from flask import Flask

from tools.bench.noop import loopback_parser, loopback_settings
from webhook.server.master import WebhookApplication

WITHOUT = ("access-log", "metrics", "decision")


def _switch_off(part: str) -> None:
    from webhook import admission
    from webhook.policy import PolicySet
    from webhook.server.app import access_log, metrics

    if part == "access-log":
        access_log.write = lambda fields, fd=access_log.STDOUT: None
    elif part == "metrics":
        metrics.observe_review = lambda endpoint, decision, seconds: None
    else:
        decide = admission.review
        first: dict[admission.Endpoint, admission.ReviewResult] = {}

        def reused(
            request: admission.AdmissionRequest, policies: PolicySet, endpoint: admission.Endpoint
        ) -> admission.ReviewResult:
            if endpoint not in first:
                first[endpoint] = decide(request, policies, endpoint)
            return first[endpoint]

        admission.review = reused


class PartsApplication(WebhookApplication):
    """`webhook serve`'s application, with `without` switched off in each worker."""

    without = "access-log"

    def load(self) -> Flask:
        """The webhook's app (after the fork, like the webhook's), less one part."""
        app = super().load()
        _switch_off(self.without)
        return app


def main(argv: list[str] | None = None) -> None:
    """Serve on 127.0.0.1 until SIGTERM."""
    parser = loopback_parser("python -m tools.bench.parts", __doc__)
    parser.add_argument("--without", choices=WITHOUT, required=True)
    args = parser.parse_args(argv)
    application = PartsApplication(loopback_settings(args))
    application.without = args.without
    application.run()


if __name__ == "__main__":
    main()
