"""Secret and ConfigMap volumes written as kubelet writes them: by kubelet's own AtomicWriter
(`pkg/volume/util/atomic_writer.go`), built as `kubelet-atomic-writer` (kube/atomicwriter/).

A reader going through the volume sees the old set of files or the new one, never a mix;
writing the same payload again changes nothing. `defaultMode` is the volume's (0644 unless
the pod says otherwise): `webhook_modes` reads those of the webhook Deployment in deploy/, and
`install_secret` publishes a certificate set into its `tls` volume, for a server run from the
checkout by the tests and the fault suite.
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
from pathlib import Path

import yaml

from tools.cluster import binaries
from tools.paths import REPO

DEFAULT_MODE = 0o644
TLS_FILES = ("tls.crt", "tls.key")  # the items of the serving Secret the webhook mounts


def atomic_write(target: Path, files: dict[str, bytes], mode: int = DEFAULT_MODE) -> None:
    """Publish `files` as the volume's new content at `target` (created if missing)."""
    target.mkdir(parents=True, exist_ok=True)
    payload = {
        name: {"Data": base64.b64encode(data).decode(), "Mode": mode}
        for name, data in files.items()
    }
    done = subprocess.run(
        [str(binaries.path("kubelet-atomic-writer")), str(target)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise OSError(f"kubelet-atomic-writer {target}: {done.stderr.strip()}")


@functools.cache
def webhook_modes() -> dict[str, int]:
    """The webhook Deployment's Secret and ConfigMap volumes by name: their `defaultMode`, as
    `kubectl kustomize deploy/` renders them (the built kubectl: this module needs the build)."""
    rendered = subprocess.run(
        [str(binaries.path("kubectl")), "kustomize", str(REPO / "deploy")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    [deployment] = [
        obj
        for obj in yaml.safe_load_all(rendered)
        if obj and (obj["kind"], obj["metadata"]["name"]) == ("Deployment", "lwgpu-webhook")
    ]
    return {
        volume["name"]: source.get("defaultMode", DEFAULT_MODE)
        for volume in deployment["spec"]["template"]["spec"]["volumes"]
        for kind in ("secret", "configMap")
        if (source := volume.get(kind)) is not None
    }


def install_secret(target: Path, source: Path) -> None:
    """What kubelet does to the webhook's `tls` volume at `target` when its Secret becomes the
    certificate set in `source` (the first time: populates it)."""
    files = {name: (source / name).read_bytes() for name in TLS_FILES}
    atomic_write(target, files, webhook_modes()["tls"])
