"""What kubelet does to a mounted Secret or ConfigMap volume when its source changes.

kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go, `Write`) writes the new contents to a
fresh hidden directory, points a `..data_tmp` symlink at it and renames that over `..data` in
one step; the visible files are symlinks through `..data`, so a reader sees the old set or the
new one, never a mix. `install_kubelet_style` does this for a certificate set,
`ConfigMapVolume` for a policy file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TLS_FILES = ("tls.crt", "tls.key", "ca.crt")


def install_kubelet_style(live: Path, source: Path, version: str) -> None:
    """What kubelet's AtomicWriter does: a new hidden dir, then one rename of ``..data``."""
    shutil.copytree(source, live / version)
    os.symlink(version, live / "..data_tmp")
    os.rename(live / "..data_tmp", live / "..data")
    for name in TLS_FILES:
        if not (live / name).is_symlink():
            os.symlink(f"..data/{name}", live / name)


class ConfigMapVolume:
    """A directory updated like kubelet updates a ConfigMap volume; ``path`` is what to serve."""

    def __init__(self, root: Path, text: str):
        self.root, self.version = root, 0
        root.mkdir()
        self.write(text)
        os.symlink("..data/policy.yaml", root / "policy.yaml")
        self.path = root

    def write(self, text: str) -> None:
        """Publish ``text`` as the next version, in one rename."""
        self.version += 1
        data = self.root / f"..v{self.version}"
        data.mkdir()
        (data / "policy.yaml").write_text(text)
        os.symlink(data.name, self.root / "..data_tmp")
        os.rename(self.root / "..data_tmp", self.root / "..data")
