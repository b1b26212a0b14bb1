"""Every combination of the kustomize options renders, and renders what the chart does with
the same options. Each option is a Component (deploy/components/), so a kustomization of one's
own lists any of them on top of deploy/; the overlays, each the base with one Component, could
not be combined (two of them in one kustomization add every base object twice).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.deploy.installs import COMPONENTS, build, chart_values, normalised
from tests.support import helm
from tests.support.kubectl import requires_kubectl

pytestmark = requires_kubectl
SUBSETS = [s for n in range(len(COMPONENTS) + 1) for s in itertools.combinations(COMPONENTS, n)]
INJECT = "cert-manager.io/inject-ca-from"


@pytest.mark.parametrize("components", SUBSETS, ids=lambda s: "+".join(s) or "base")
def test_every_combination_renders_what_the_chart_renders(
    helm_bin: Path, tmp_path: Path, components: tuple[str, ...]
) -> None:
    kustomized = normalised(build(tmp_path, components))
    assert normalised(helm.template(*chart_values(components))) == kustomized


def test_all_components_together_each_do_their_part(tmp_path: Path) -> None:
    objects = normalised(build(tmp_path, COMPONENTS))
    assert {("ClusterRole", "lwgpu-discovery"), ("Certificate", "lwgpu-webhook")} <= set(objects)
    assert not [name for _, name in objects if name.startswith("lwgpu-certs")]
    hooks = [objects[k] for k in objects if k[0].endswith("WebhookConfiguration")]
    assert sorted(h["metadata"]["name"] for h in hooks) == ["lwgpu-mutate", "lwgpu-validate"]
    assert {h["metadata"]["annotations"][INJECT] for h in hooks} == {"lwgpu-system/lwgpu-webhook"}
    [endpoint] = objects["ServiceMonitor", "lwgpu-webhook"]["spec"]["endpoints"]
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "lwgpu-webhook-tls", "key": "ca.crt"}}


def test_cert_manager_goes_last_because_it_adjusts_what_came_before(tmp_path: Path) -> None:
    """The rule components/cert-manager states: listed first, it cannot reach the validating
    webhook and the ServiceMonitor that later components add."""
    first = ["cert-manager", *(c for c in COMPONENTS if c != "cert-manager")]
    objects = normalised(build(tmp_path, first))
    validate = objects["ValidatingWebhookConfiguration", "lwgpu-validate"]
    assert INJECT not in validate["metadata"].get("annotations", {})
    [endpoint] = objects["ServiceMonitor", "lwgpu-webhook"]["spec"]["endpoints"]
    assert "configMap" in endpoint["tlsConfig"]["ca"]
