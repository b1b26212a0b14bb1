"""One JSON line per review on stdout: who asked about what, and what was decided.

Only identifying fields are logged, never the object: pod specs carry environment
variables and annotations that may hold secrets. Each line goes out in a single
``write(2)`` on file descriptor 1; lines are far below ``PIPE_BUF`` (4 KiB), so lines
from concurrent threads and gunicorn workers never interleave in the container log.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import orjson

from webhook.admission import ReviewResult, object_name, request_of

STDOUT = 1


def _text(mapping: object, key: str) -> str:
    value = mapping.get(key) if isinstance(mapping, Mapping) else None
    return value if isinstance(value, str) else ""


def failed(endpoint: str, status: int, duration_s: float, body: object) -> dict[str, object]:
    """The fields of the line for a request that failed before a decision (4xx, 5xx).

    Logged from what the body holds, so an operator can still match it with the
    apiserver's audit log by uid. Same keys as ``reviewed``.
    """
    request = request_of(body)
    return {
        "uid": _text(request, "uid"),
        "namespace": _text(request, "namespace"),
        "name": object_name(request),
        "kind": _text(request.get("kind"), "kind"),
        "operation": _text(request, "operation"),
        "endpoint": endpoint,
        "status": status,
        "decision": "error",
        "profile": None,
        "dry_run": request.get("dryRun") is True,
        "duration_ms": round(duration_s * 1000, 3),
    }


def reviewed(endpoint: str, duration_s: float, result: ReviewResult) -> dict[str, object]:
    """The fields of the line for an answered review (HTTP 200), read from its ``ReviewResult``.

    Same keys as ``failed``.
    """
    return {
        "uid": result.uid,
        "namespace": result.namespace,
        "name": result.name,
        "kind": result.kind,
        "operation": result.operation,
        "endpoint": endpoint,
        "status": 200,
        "decision": result.decision,
        "profile": result.profile,
        "dry_run": result.dry_run,
        "duration_ms": round(duration_s * 1000, 3),
    }


def write(fields: Mapping[str, object], fd: int = STDOUT) -> None:
    """Write one compact JSON line with one system call (see the module docstring for why)."""
    os.write(fd, orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE))
