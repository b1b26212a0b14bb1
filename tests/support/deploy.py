"""The install in `deploy/` as `kubectl kustomize` renders it, and what tests expect of it.

`render` gives the objects of a target (the base, "", or an overlay), once per target;
`find`, `pod_template`, `containers`, `named_container` and `only_container` pick one object,
its pod template, its containers, one of them by name or its single container. `SERVE_ARGS`
and `SYNC_ARGS` (the webhook pod's two command lines), `WORKLOADS` (what the install runs),
`WEBHOOKS` (its webhook configuration, and the validating one of the option) are what the
manifest, workload, image and matchConditions tests all check. `schema_errors` validates
rendered objects (the kustomize tree's and the Helm chart's) against the Kubernetes schemas of
`K8S_VERSIONS`.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterable
from pathlib import Path

import kubernetes_validate
import yaml

from tests.support.kubectl import KUBECTL
from tests.support.paths import DEPLOY
from webhook.api.types import KubeObject

BASE, CERT_MANAGER = "", "overlays/cert-manager"
VALIDATING = "overlays/validating-webhook"  # the base with components/validating-webhook
DISCOVERY = "overlays/discovery"  # the base with components/discovery (Node read access)
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
SYNC_ARGS = ["policy", "sync", "--policies", "/etc/lwgpu/policies"]
WORKLOADS = [  # (kind, name) of every workload the install runs
    ("Deployment", "lwgpu-webhook"),
    ("DaemonSet", "lwgpu-labeller"),
    ("Job", "lwgpu-certs"),
    ("CronJob", "lwgpu-certs-rotate"),
]
WEBHOOKS = [  # (kind, name, path, failurePolicy, the target that installs it)
    ("MutatingWebhookConfiguration", "lwgpu-mutate", "/mutate", "Ignore", BASE),
    ("ValidatingWebhookConfiguration", "lwgpu-validate", "/validate", "Ignore", VALIDATING),
]


# The oldest Kubernetes the install supports (the final-state check's CEL uses two-variable
# comprehensions, 1.32; matchConditions and ValidatingAdmissionPolicy are GA in 1.30) and the
# newest kubernetes-validate knows.
K8S_VERSIONS = ("1.32.0", kubernetes_validate.latest_version())
# API groups of the custom resources the installs may carry: no Kubernetes schema checks them.
CUSTOM_GROUPS = {"cert-manager.io", "monitoring.coreos.com"}


def schema_errors(objects: Iterable[KubeObject], version: str) -> tuple[list[str], set[str]]:
    """kubernetes-validate's strict errors on `objects` for Kubernetes `version`, and the
    kinds of the custom resources it skipped."""
    errors: list[str] = []
    custom: set[str] = set()
    for obj in objects:
        if obj["apiVersion"].split("/")[0] in CUSTOM_GROUPS:
            custom.add(obj["kind"])
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {err.message}")
    return errors, custom


def kustomize(target: Path = DEPLOY) -> list[KubeObject]:
    """The objects `kubectl kustomize <target>` renders (what `kubectl apply -k` installs)."""
    out = subprocess.run(
        [KUBECTL or "kubectl", "kustomize", str(target)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@functools.cache
def render(target: str) -> tuple[KubeObject, ...]:
    """The objects `kubectl kustomize deploy/<target>` renders, cached per target."""
    return tuple(kustomize(DEPLOY / target))


def find(kind: str, name: str, target: str = BASE) -> KubeObject:
    """The one rendered object of that kind and name."""
    [obj] = [o for o in render(target) if (o["kind"], o["metadata"]["name"]) == (kind, name)]
    return obj


def pod_template(obj: KubeObject) -> KubeObject:
    """The pod template of a workload (a CronJob's is one level deeper)."""
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    template: KubeObject = spec["template"]
    return template


def containers(kind: str, name: str) -> list[KubeObject]:
    """The containers of a workload's pod."""
    found: list[KubeObject] = pod_template(find(kind, name))["spec"]["containers"]
    return found


def named_container(kind: str, name: str, container: str) -> KubeObject:
    """The container of that name in a workload's pod."""
    [found] = [c for c in containers(kind, name) if c["name"] == container]
    return found


def only_container(kind: str, name: str) -> KubeObject:
    """The single container of a workload's pod."""
    [container] = containers(kind, name)
    return container
