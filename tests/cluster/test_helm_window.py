"""The Helm chart installed with a custom `policy` on a control plane of this module's own:
the chart ships the final-state check compiled from the shipped policy (a chart cannot run
the compiler), and the policy-sync sidecar replaces it with the custom policy's within
seconds of its start. This measures that window, during which the apiserver checks against
the shipped policy's check.

A control plane of its own: the chart's cluster-scoped objects bear the names of the session's
install. The window runs from the sidecar's process start to its log line saying it applied
the check (the apiserver takes a policy up from its informer a moment after that).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from functools import partial
from pathlib import Path

import pytest
import yaml

from tests.support import helm
from tests.support.cluster import FLEET, require_binaries
from tests.support.paths import DEPLOY, EXAMPLE_POLICIES
from tools.cluster import controlplane, fleet, install
from tools.cluster.install import Installation
from tools.waiting import wait_for
from webhook.compile import final_state_check
from webhook.compile.final_state import NAME
from webhook.files import load_policies

pytestmark = pytest.mark.cluster
CUSTOM = EXAMPLE_POLICIES / "mixed-fleet.yaml"
APPLIED = "applied the final-state check of policy generation 1"
WINDOW_S = 15  # the sidecar imports the client (~1 s), reads the policy and applies


@pytest.fixture(scope="module")
def chart_installed(tmp_path_factory) -> Iterator[Installation]:
    """`helm template --set-file policy=<mixed-fleet>` applied, its pods run by the kubelet
    (without the pre-install check's hook, which `helm install` alone runs:
    tests/cluster/test_helm_policy_check.py)."""
    require_binaries()
    try:
        helm.helm_binary()
    except helm.HelmUnavailable as exc:
        pytest.skip(f"no helm: {exc}")
    render = helm.helm(
        "template", helm.RELEASE, str(helm.CHART), "--namespace", install.NAMESPACE,
        *helm.REQUIRED, "--set-file", f"policy={CUSTOM}", "--no-hooks",
    ).stdout  # fmt: skip
    with controlplane.running(tmp_path_factory.mktemp("helm-plane")) as plane:
        fleet.create(plane, FLEET)
        plane.kubectl("create", "-f", str(DEPLOY / "base" / "namespace.yaml"))
        pods = tmp_path_factory.mktemp("helm-pods")
        with install.installed(plane, pods, manifests=render) as installation:
            yield installation


def _logged_at(line: str) -> float:
    """The time of a `[YYYY-MM-DD HH:MM:SS,mmm] ...` log line (local time, as logging writes)."""
    stamp = line[1 : line.index("]")]
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _applied(log: Path) -> str | None:
    """The sidecar's log line saying it applied the check, once it is there."""
    return next((line for line in log.read_text().splitlines() if APPLIED in line), None)


def test_the_sidecar_replaces_the_shipped_check_within_seconds(chart_installed):
    custom = final_state_check(load_policies(CUSTOM))[0]["spec"]
    shipped = next(yaml.safe_load_all((DEPLOY / "base" / "final-state.yaml").read_text()))["spec"]
    windows = []
    for running in chart_installed.webhook:
        [sidecar] = [c for c in running.containers if c.name == "policy-sync"]
        line = wait_for(partial(_applied, sidecar.log), timeout=60, what="the sidecar to apply")
        windows.append(_logged_at(line) - sidecar.started)
    shown = ", ".join(f"{w:.2f}s" for w in windows)
    print(f"sidecar start -> the custom policy's check applied: {shown}")

    got = chart_installed.plane.kubectl("get", "validatingadmissionpolicy", NAME, "-o", "json")
    assert json.loads(got.stdout)["spec"]["variables"] == custom["variables"]
    assert custom["variables"] != shipped["variables"]
    assert max(windows) < WINDOW_S
