"""The real `kubectl`: the one built with the test control plane (tools/cluster/, the version
of its kube-apiserver) where it is built, else the one on PATH; a skip mark for tests that need
it, and its local JSON Patch engine (`kubectl patch --local --type json`, Kubernetes' own),
which shows that a webhook's patch applies as the apiserver would apply it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tools.cluster import binaries
from webhook.api.types import KubeObject

KUBECTL = (
    str(binaries.path("kubectl")) if binaries.path("kubectl").is_file() else shutil.which("kubectl")
)
requires_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kubectl_patch(tmp_path: Path, obj: KubeObject, ops: list[dict[str, Any]]) -> KubeObject:
    """`obj` patched by kubectl's local JSON Patch engine."""
    source = tmp_path / "object.json"
    source.write_text(json.dumps(obj), encoding="utf-8")
    done = subprocess.run(
        [
            KUBECTL or "kubectl",
            "patch",
            "--local",
            "--type",
            "json",
            "-f",
            str(source),
            "-p",
            json.dumps(ops),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    patched: KubeObject = json.loads(done.stdout)
    return patched
