"""The install in `deploy/` as `kubectl kustomize` renders it, and what tests expect of it.

`render` gives the objects of a target (the base, "", or the cert-manager overlay), once per
target; `find`, `pod_template` and `only_container` pick one object, its pod template or its
single container. `SERVE_ARGS` (the webhook container's command line), `WORKLOADS` (what the
install runs) and `WEBHOOKS` (its two webhook configurations) are what the manifest, workload,
image and matchConditions tests all check.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import yaml

from tests.support.paths import DEPLOY

BASE, CERT_MANAGER = "", "overlays/cert-manager"
NS = "lwgpu-system"
SERVE_ARGS = [
    "serve",
    "--host",
    "0.0.0.0",
    "--port",
    "8443",
    "--policies",
    "/etc/lwgpu/policies",
    "--tls-dir",
    "/etc/lwgpu/tls",
    "--workers",
    "2",
    "--threads",
    "8",
]
WORKLOADS = [  # (kind, name) of every workload the install runs
    ("Deployment", "lwgpu-webhook"),
    ("DaemonSet", "lwgpu-labeller"),
    ("Job", "lwgpu-certs"),
    ("CronJob", "lwgpu-certs-rotate"),
]
WEBHOOKS = [  # (kind, name, path, failurePolicy)
    ("MutatingWebhookConfiguration", "lwgpu-mutate", "/mutate", "Fail"),
    ("ValidatingWebhookConfiguration", "lwgpu-validate", "/validate", "Ignore"),
]


def kustomize(target: Path = DEPLOY) -> list[dict]:
    """The objects `kubectl kustomize <target>` renders (what `kubectl apply -k` installs)."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(target)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@functools.cache
def render(target: str) -> tuple[dict, ...]:
    """The objects `kubectl kustomize deploy/<target>` renders, cached per target."""
    return tuple(kustomize(DEPLOY / target))


def find(kind: str, name: str, target: str = BASE) -> dict:
    """The one rendered object of that kind and name."""
    [obj] = [o for o in render(target) if (o["kind"], o["metadata"]["name"]) == (kind, name)]
    return obj


def pod_template(obj: dict) -> dict:
    """The pod template of a workload (a CronJob's is one level deeper)."""
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    return spec["template"]


def only_container(kind: str, name: str) -> dict:
    """The single container of a workload's pod."""
    [container] = pod_template(find(kind, name))["spec"]["containers"]
    return container
