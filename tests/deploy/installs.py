"""The options of both installs side by side: a kustomization of one's own that lists
Components of deploy/components/ on top of deploy/ (what docs/OPERATIONS.md tells users to
write), the chart values that select the same options, and the objects of either compared
without the labels only Helm adds.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable
from pathlib import Path

import yaml

from tests.support.deploy import kustomize
from tests.support.paths import DEPLOY
from webhook.api.types import KubeObject

# Every Component, in the order a kustomization lists them: cert-manager last, since it
# adjusts what the others made (components/cert-manager/kustomization.yaml).
COMPONENTS = ("discovery", "validating-webhook", "monitoring", "cert-manager")
# component -> the chart's values that select the same option
CHART_VALUES = {
    "discovery": ["--set", "discovery.enabled=true"],
    "validating-webhook": ["--set", "validatingWebhook.enabled=true"],
    "monitoring": ["--set", "monitoring.enabled=true"],
    "cert-manager": ["--set", "certificates.mode=cert-manager"],
}
# The labels Helm's own templates add; kustomize's part-of label is on both renders.
HELM_LABELS = {
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "helm.sh/chart",
}


def build(workdir: Path, components: Iterable[str]) -> list[KubeObject]:
    """What `kubectl kustomize` renders from a kustomization in `workdir` that builds on
    deploy/ and lists `components` (names under deploy/components/), in that order."""
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(DEPLOY, workdir)],
        "components": [os.path.relpath(DEPLOY / "components" / c, workdir) for c in components],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kustomize(workdir)


def chart_values(components: Iterable[str]) -> list[str]:
    """The chart's arguments for the options `components` add."""
    return [arg for c in components for arg in CHART_VALUES[c]]


def normalised(objects: Iterable[KubeObject]) -> dict[tuple[str, str], KubeObject]:
    """(kind, name) -> the object without Helm's own labels (and without the Namespace,
    which the chart cannot own: Helm stores its release there first)."""
    out = {}
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        obj = copy.deepcopy(obj)
        labels = obj["metadata"].get("labels", {})
        for label in HELM_LABELS:
            labels.pop(label, None)
        out[obj["kind"], obj["metadata"]["name"]] = obj
    return out
