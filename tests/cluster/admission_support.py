"""What the admission tests on the real control plane share: the calls the installed webhook
received, a namespace that lasts a whole module, and webhook configurations a test adds.

The webhook's calls are read from its pods' access logs: one JSON line per review
(webhook/server/app/access_log.py), written before the answer goes out
(webhook/server/app/reviews.py, `Reviews.answer`), so every call of a `kubectl` command is in
the logs by the time the command returns. The lines name namespace, kind, name, operation,
endpoint, decision and dry run, so a test that looks only at its own namespace is not
disturbed by any other test's requests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Iterator

from tests.support.cluster import Namespace
from tools.cluster.controlplane import ControlPlane
from tools.cluster.install import Installation

MUTATE, VALIDATE = "mutate.lwgpu.io", "validate.lwgpu.io"
# The counters of requests that reached /mutate or /validate: answered reviews and HTTP errors.
ANSWERED = ("lwgpu_admission_reviews_total", "lwgpu_admission_request_errors_total")
_numbers = itertools.count(1)


class Calls:
    """The reviews the webhook's pods log from now on."""

    def __init__(self, lwgpu: Installation) -> None:
        self._logs = [pod.log for pod in lwgpu.webhook]
        self._start = {log: log.stat().st_size for log in self._logs}

    def since(self, namespace: str | None = None, kind: str | None = None) -> list[dict]:
        """Every line logged since this object was made, in `namespace` (of `kind`) if given."""
        found = []
        for log in self._logs:
            with log.open("rb") as text:
                text.seek(self._start[log])
                for line in text.read().decode(errors="replace").splitlines():
                    # gunicorn's own lines and tracebacks share the log; reviews are JSON
                    if line.startswith("{") and '"endpoint"' in line:
                        found.append(json.loads(line))
        return [
            c for c in found if namespace in (None, c["namespace"]) and kind in (None, c["kind"])
        ]

    def endpoints(self, namespace: str | None = None, kind: str | None = None) -> list[str]:
        """The endpoints called since this object was made, sorted (two pods log apart)."""
        return sorted(c["endpoint"] for c in self.since(namespace, kind))


def answered(lwgpu: Installation) -> float:
    """Requests the webhook's pods answered on /mutate and /validate, from their /metrics."""
    return sum(s.value for pod in lwgpu.webhook for s in lwgpu.samples(pod) if s.name in ANSWERED)


@contextlib.contextmanager
def module_namespace(plane: ControlPlane, prefix: str) -> Iterator[Namespace]:
    """A namespace for the tests of one module; deleted, with its pods, at the end."""
    name = f"{prefix}{next(_numbers)}-{os.getpid()}"
    plane.kubectl("create", "namespace", name)
    try:
        yield Namespace(name, plane)
    finally:
        plane.kubectl("delete", "namespace", name, "--wait=false")
        plane.kubectl(
            "delete", "pods", "--all", "-n", name, "--force", "--grace-period=0", check=False
        )


def installed_webhook(plane: ControlPlane, kind: str, name: str) -> dict:
    """The one webhook of an installed configuration (caBundle included)."""
    config = json.loads(plane.kubectl("get", kind, name, "-o", "json").stdout)
    [hook] = config["webhooks"]
    return hook


@contextlib.contextmanager
def webhook_configuration(plane: ControlPlane, kind: str, name: str, hook: dict) -> Iterator[None]:
    """A webhook configuration of the test's own with one webhook, deleted at the end (also
    when the test fails, so the other tests of the session never meet it)."""
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [hook],
    }
    created = plane.kubectl("create", "-f", "-", input=json.dumps(config), check=False)
    assert created.returncode == 0, created.stderr
    try:
        yield
    finally:
        plane.kubectl("delete", kind, name, "--ignore-not-found")


def restricted(pod: dict) -> dict:
    """`pod` with the security settings the `restricted` Pod Security level asks
    (lwgpu-system enforces it: deploy/base/namespace.yaml)."""
    secured = json.loads(json.dumps(pod))
    secured["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for container in secured["spec"]["containers"]:
        container["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
    return secured


ABSENT = object()


def at(obj: object, pointer: str) -> object:
    """The value at a JSON pointer (RFC 6901) in `obj`, or ABSENT."""
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(obj, list) and token.isdigit() and int(token) < len(obj):
            obj = obj[int(token)]
        elif isinstance(obj, dict) and token in obj:
            obj = obj[token]
        else:
            return ABSENT
    return obj
