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

STDOUT = 1


def _text(mapping: object, key: str) -> str:
    value = mapping.get(key) if isinstance(mapping, Mapping) else None
    return value if isinstance(value, str) else ""


def request_of(body: object) -> Mapping:
    """``body["request"]`` when the body has one, else an empty mapping."""
    request = body.get("request") if isinstance(body, Mapping) else None
    return request if isinstance(request, Mapping) else {}


def object_name(request: Mapping) -> str:
    """``request.name``, else the object's ``metadata.name`` or ``metadata.generateName``.

    The apiserver sends an empty ``request.name`` for objects named by ``generateName``
    (pods of a ReplicaSet), so the prefix is the only name there is at admission time.
    """
    obj = request.get("object")
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    return _text(request, "name") or _text(metadata, "name") or _text(metadata, "generateName")


def entry(
    endpoint: str, status: int, duration_s: float, body: object, result: object = None
) -> dict:
    """The fields of one line; identity from the review ``result`` when there is one, else the body.

    A request that failed before a decision (400, 500) is logged from what the body holds,
    so an operator can still match it with the apiserver's audit log by uid.
    """
    request = request_of(body)
    kind = request.get("kind")
    return {
        "uid": getattr(result, "uid", None) or _text(request, "uid"),
        "namespace": getattr(result, "namespace", None) or _text(request, "namespace"),
        "name": getattr(result, "name", None) or object_name(request),
        "kind": getattr(result, "kind", None) or _text(kind, "kind"),
        "operation": getattr(result, "operation", None) or _text(request, "operation"),
        "endpoint": endpoint,
        "status": status,
        "decision": getattr(result, "decision", "error"),
        "profile": getattr(result, "profile", None),
        "dry_run": bool(getattr(result, "dry_run", request.get("dryRun") is True)),
        "duration_ms": round(duration_s * 1000, 3),
    }


def reviewed(endpoint: str, duration_s: float, result) -> dict:
    """The fields of the line for an answered review (HTTP 200), read from its ``ReviewResult``.

    Same keys and values as ``entry`` gives for a result; built directly because it runs
    for every review.
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
