"""The options of both installs side by side: a kustomization of one's own that lists
Components of deploy/components/ on top of deploy/ (what docs/OPERATIONS.md tells users to
write, with the patch that gives the NetworkPolicy its apiserver peers), the chart values that
select the same options, and the objects of either compared without the labels only Helm adds.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable
from pathlib import Path

import yaml

from tests.support.deploy import kustomize
from tests.support.helm import APISERVER_PEERS
from tests.support.paths import DEPLOY
from webhook.api.types import KubeObject

# Every Component, in the order a kustomization lists them: cert-manager last, since it
# adjusts what the others made (components/cert-manager/kustomization.yaml).
COMPONENTS = ("discovery", "validating-webhook", "monitoring", "network-policy", "cert-manager")
# The patch the network-policy Component needs (its own comments show it): the peers the chart
# is given in tests/support/helm.py REQUIRED.
APISERVER_PATCH = {
    "target": {"kind": "NetworkPolicy", "name": "lwgpu-ingress"},
    "patch": json.dumps(
        [{"op": "replace", "path": "/spec/ingress/0/from", "value": APISERVER_PEERS}]
    ),
}
# component -> the chart's values that select the same option (the NetworkPolicy is on in the
# chart unless turned off)
CHART_VALUES = {
    "discovery": ["--set", "discovery.enabled=true"],
    "validating-webhook": ["--set", "validatingWebhook.enabled=true"],
    "monitoring": ["--set", "monitoring.enabled=true"],
    "cert-manager": ["--set", "certificates.mode=cert-manager"],
    "network-policy": [],
}
NO_NETWORK_POLICY = ["--set", "networkPolicy.enabled=false"]
# The labels Helm's own templates add; kustomize's part-of label is on both renders.
HELM_LABELS = {
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "helm.sh/chart",
}


def build(workdir: Path, components: Iterable[str], *, peers: bool = True) -> list[KubeObject]:
    """What `kubectl kustomize` renders from a kustomization in `workdir` that builds on
    deploy/ and lists `components` (names under deploy/components/), in that order, with the
    NetworkPolicy's apiserver peers patched in where it is one of them (unless not `peers`)."""
    components = list(components)
    kustomization: dict[str, object] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(DEPLOY, workdir)],
        "components": [os.path.relpath(DEPLOY / "components" / c, workdir) for c in components],
    }
    if peers and "network-policy" in components:
        kustomization["patches"] = [APISERVER_PATCH]
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kustomize(workdir)


def chart_values(components: Iterable[str]) -> list[str]:
    """The chart's arguments for the options `components` add."""
    components = list(components)
    off = [] if "network-policy" in components else NO_NETWORK_POLICY
    return [arg for c in components for arg in CHART_VALUES[c]] + off


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
