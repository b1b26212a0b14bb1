"""One JSON line per review on stdout: who asked about what, and what was decided.

Only identifying fields are logged, never the object: pod specs carry environment
variables and annotations that may hold secrets. Each line goes out in a single
``write(2)`` on file descriptor 1. A write of at most ``PIPE_BUF`` (4096 bytes on Linux)
to a pipe is atomic (pipe(7)), so lines from concurrent threads and gunicorn workers never
interleave when stdout is a pipe shared by all of them: every text field is cut to a
length (``FIELD_LIMITS``) that keeps the line below it, whatever a client sends as a uid
or name, even when each character needs JSON's six-byte escape.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import orjson

from webhook.admission import Endpoint, object_name, text_of
from webhook.api.text import shorten

STDOUT = 1
PIPE_BUF = 4096
# Characters kept of each text field: the apiserver's own bounds (a uid is 36 characters,
# a namespace a 63-character label, an object name a 253-character subdomain), so no real
# value is ever cut. Worst case: 522 characters x 6 bytes plus keys, about 3.3 KiB.
FIELD_LIMITS = {
    "uid": 64,
    "namespace": 63,
    "name": 253,
    "kind": 63,
    "operation": 16,
    "endpoint": 16,
    "decision": 16,
    "profile": 63,
}


def line(
    endpoint: Endpoint,
    status: int,
    duration_s: float,
    request: Mapping[str, object],
    outcome: str,
    profile: str | None,
) -> dict[str, object]:
    """The fields of the line for one request to a review endpoint, answered or failed.

    ``request`` is the checked request of an answered review (200, with the ``outcome`` the
    endpoint answered and the profile applied), or for a request that failed (4xx, 5xx;
    ``outcome`` "error") whatever its body holds (``request_of``): an operator can then
    still match it with the apiserver's audit log by uid. Every field is read leniently.
    """
    return {
        "uid": text_of(request, "uid"),
        "namespace": text_of(request, "namespace"),
        "name": object_name(request),
        "kind": text_of(request.get("kind"), "kind"),
        "operation": text_of(request, "operation"),
        "endpoint": endpoint,
        "status": status,
        "decision": outcome,
        "profile": profile,
        "dry_run": request.get("dryRun") is True,
        "duration_ms": round(duration_s * 1000, 3),
    }


def write(fields: Mapping[str, object], fd: int = STDOUT) -> None:
    """Write one compact JSON line with one system call (see the module docstring for why)."""
    bounded = {
        key: shorten(value, FIELD_LIMITS.get(key, 63)) if isinstance(value, str) else value
        for key, value in fields.items()
    }
    os.write(fd, orjson.dumps(bounded, option=orjson.OPT_APPEND_NEWLINE))
