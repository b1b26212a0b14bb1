"""The webhook's two volumes as kubelet updates them, for tests of a server running from the
checkout: the TLS Secret volume and the policy ConfigMap volume, each written by kubelet's own
AtomicWriter (`pkg/volume/util/atomic_writer.go`, `AtomicWriter.Write`, through
tools/cluster/volumes.py) with the `defaultMode` the Deployment in deploy/ gives that volume.

The writer picks the hidden directory's name itself (`..<timestamp>.<random>`, `newTimestampDir`),
so callers never name a version. Where the built binaries are missing, the helpers skip the test
with the build hint (fail under CI=true): see `tests.support.cluster.require_binaries`.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cluster import require_binaries
from tools.cluster import volumes


def install_secret(live: Path, source: Path) -> None:
    """`tools.cluster.volumes.install_secret`, skipped where the binaries are not built."""
    require_binaries()
    volumes.install_secret(live, source)


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
            self.root, {"policy.yaml": text.encode()}, volumes.webhook_modes()["policies"]
        )
