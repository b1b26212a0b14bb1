"""The webhook's two volumes as kubelet updates them, for tests of a server running from the
checkout: the TLS Secret volume and the policy ConfigMap volume, each written by kubelet's own
AtomicWriter (`pkg/volume/util/atomic_writer.go`, `AtomicWriter.Write`, through
tools/cluster/volumes.py) with the `defaultMode` the Deployment in deploy/ gives that volume.

The writer picks the hidden directory's name itself (`..<timestamp>.<random>`, `newTimestampDir`),
so callers never name a version. Where the built binaries are missing, the helpers skip the test
with the build hint (fail under CI=true): see `tests.support.cluster.require_binaries`.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tests.support import deploy
from tests.support.cluster import require_binaries
from tools.cluster import volumes

TLS_FILES = ("tls.crt", "tls.key", "ca.crt")  # a kubernetes.io/tls Secret with its CA


@functools.cache
def _default_modes() -> dict[str, int]:
    """The webhook Deployment's Secret and ConfigMap volumes by name: their `defaultMode`."""
    template = deploy.pod_template(deploy.find("Deployment", "lwgpu-webhook"))
    return {
        volume["name"]: source.get("defaultMode", volumes.DEFAULT_MODE)
        for volume in template["spec"]["volumes"]
        for kind in ("secret", "configMap")
        if (source := volume.get(kind)) is not None
    }


def install_secret(live: Path, source: Path) -> None:
    """What kubelet does to the webhook's `tls` volume at `live` when the Secret becomes the
    certificate set in `source` (the first time: populates it)."""
    require_binaries()
    files = {name: (source / name).read_bytes() for name in TLS_FILES}
    volumes.atomic_write(live, files, _default_modes()["tls"])


class ConfigMapVolume:
    """The webhook's `policies` volume at `root`, holding one `policy.yaml`; `path` is what
    `serve --policies` is given (the mounted directory, as in deploy/)."""

    def __init__(self, root: Path, text: str):
        require_binaries()
        self.root = self.path = root
        self.write(text)

    def write(self, text: str) -> None:
        """Publish `text` as the ConfigMap's new `policy.yaml`, as kubelet does."""
        volumes.atomic_write(
            self.root, {"policy.yaml": text.encode()}, _default_modes()["policies"]
        )
