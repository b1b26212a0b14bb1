"""What the installer and the rotation share in talking to the Kubernetes API: conflicts
retried a bounded number of times, 404 read as "absent", and failures as one-line CertErrors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from webhook.kube.inventory import failure

from .errors import CertError

MAX_ATTEMPTS = 5
T = TypeVar("T")


def calling(step: Callable[[], T]) -> T:
    """``step()``, with an API failure or an unreachable API as a one-line CertError."""
    try:
        return step()
    except ApiException as exc:
        raise CertError(describe(exc)) from None
    except urllib3.exceptions.HTTPError as exc:
        # The cause in a few words ("timed out", "connection refused"), not urllib3's own
        # message, which names pool and connection objects.
        raise CertError(f"cannot reach the Kubernetes API: {failure(exc)}") from None


def retry(step: Callable[[], T], what: str, attempts: int) -> T:
    """``step()`` again after each 409 Conflict, at most ``attempts`` times in all."""
    for _ in range(attempts):
        try:
            return step()
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise CertError(f"{what} kept changing under us: gave up after {attempts} conflicts")


def none_if_missing(read: Callable[[], T]) -> T | None:
    """``read()``, or None where the object does not exist (404)."""
    try:
        return read()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def describe(exc: ApiException) -> str:
    """The apiserver's answer in one line: status, reason and its message."""
    try:
        message = json.loads(exc.body or "").get("message", "")
    except (ValueError, AttributeError):
        message = ""
    # A body that is no Status (APF's 429 is plain text) ends in a newline: one line it is.
    detail = (message or exc.body or "").strip() or "no details"
    return f"Kubernetes API answered {exc.status} {exc.reason}: {detail}"
