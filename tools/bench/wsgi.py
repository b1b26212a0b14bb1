"""Where the end-to-end difference goes: the WSGI apps called directly, and their parts.

`python -m tools.bench.wsgi OUT.json [BUDGET_S]` times, in turns, one POST /mutate
through the webhook's app, the Flask no-op and the bare WSGI floor (no gunicorn, no
TLS), the review alone, the floors' JSON round trip, one metrics observation and one
access-log line. The webhook's difference to the bare floor that the parts do not explain
is the server's glue (edge checks, routing, error handling); the Flask no-op's difference
to the bare floor is Flask's own cost per request. These are the parts' own costs: in the
server a part also costs what it does to the worker's other threads, which `parts.py`
measures end to end. Run in its own process by `run.py`:
prometheus-client chooses its multi-process value store at import time, and the
access log writes to file descriptor 1, which is pointed at a scratch file here.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from wsgiref.types import WSGIApplication

import orjson


def _environ(body: bytes) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/mutate",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8443",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "https",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }


def _caller(app: WSGIApplication, body: bytes) -> Callable[[], bytes]:
    def call() -> bytes:
        statuses: list[str] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: object = None
        ) -> Callable[[bytes], object]:
            statuses.append(status)
            return lambda data: None  # the write() of old WSGI apps: none here uses it

        chunks = app(_environ(body), start_response)
        data = b"".join(chunks)
        # WSGI makes close() optional: Flask's response has one, a plain list does not.
        getattr(chunks, "close", lambda: None)()
        if not statuses or not statuses[0].startswith("200"):
            raise RuntimeError(f"POST /mutate answered {statuses} {data[:200]!r}")
        return data

    return call


def breakdown(budget_s: float) -> dict[str, Any]:
    """Median µs per call of each part, and the glue that the parts leave unexplained."""
    from webhook import DEFAULT_POLICIES, admission
    from webhook.server.app import access_log, metrics
    from webhook.server.app.wsgi import create_app
    from webhook.server.state.policy_store import PolicyStore

    from . import bodies, noop
    from .inprocess import orjson_floor, review_bytes
    from .timing import interleaved

    store = PolicyStore(DEFAULT_POLICIES)
    store.poll()
    policies = store.current
    assert policies is not None, store.error  # the shipped policy always loads
    body = bodies.body(bodies.seed_pod())
    # The line the server writes for an answered review, from its checked request.
    request = admission.parse_request(orjson.loads(body))
    result = admission.review(request, policies, "mutate")
    stats = interleaved(
        {
            "webhook app": _caller(create_app(store), body),
            "Flask no-op app": _caller(noop.create_app(), body),
            "bare WSGI app": _caller(noop.bare_app, body),
            "review": lambda: review_bytes(body, policies),
            "floor JSON": lambda: orjson_floor(body),
            "metrics": lambda: metrics.observe_review("mutate", "mutated", 0.001),
            "access log": lambda: access_log.write(
                access_log.line(
                    "mutate", 200, 0.001, request, result.outcome, result.decision.profile
                )
            ),
        },
        budget_s=budget_s,
        max_rounds=50_000,
    )
    median = {name: s["median_us"] for name, s in stats.items()}
    gap = median["webhook app"] - median["bare WSGI app"]
    parts = {
        "review − floor JSON": median["review"] - median["floor JSON"],
        "metrics": median["metrics"],
        "access log": median["access log"],
    }
    parts["server glue (the rest)"] = gap - sum(parts.values())
    return {
        "stats": stats,
        "flask_us": round(median["Flask no-op app"] - median["bare WSGI app"], 2),
        "gap_us": round(gap, 2),
        "parts_us": {name: round(value, 2) for name, value in parts.items()},
    }


def main(argv: list[str]) -> int:
    """Write `breakdown()` as JSON to argv[0]; PROMETHEUS_MULTIPROC_DIR must be set."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        print(
            "set PROMETHEUS_MULTIPROC_DIR to an empty folder (as the server does)", file=sys.stderr
        )
        return 2
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 1)
        result = breakdown(float(argv[1]) if len(argv) > 1 else 6.0)
    Path(argv[0]).write_bytes(orjson.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
