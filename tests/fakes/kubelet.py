"""What kubelet does to a mounted Secret or ConfigMap volume when its source changes.

kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go, `Write`) leaves the volume alone when
nothing changed; else it writes the new contents to a fresh hidden `..<timestamp>` directory
(mode 0755, files with the volume's defaultMode 0644), points a `..data_tmp` symlink at it and
renames that over `..data` in one step, links each new visible file as `<name> -> ..data/<name>`,
removes visible files no longer in the payload and then the previous hidden directory. A reader
going through `..data` sees the old set or the new one, never a mix. `atomic_write` is that
algorithm; `install_kubelet_style` uses it for a certificate set, `ConfigMapVolume` for a policy
file. tests/fakes/test_kubelet.py checks them against atomic_writer.go.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

TLS_FILES = ("tls.crt", "tls.key", "ca.crt")
DATA, DATA_TMP = "..data", "..data_tmp"


def atomic_write(target: Path, payload: dict[str, bytes], hidden: str | None = None) -> bool:
    """AtomicWriter.Write of a flat payload into the volume `target`; False if nothing changed.

    `hidden` names the new hidden directory (it must start with ".."); by default it is
    kubelet's own `..2006_01_02_15_04_05.<random>` (`newTimestampDir`).
    """
    old = os.readlink(target / DATA) if (target / DATA).is_symlink() else None
    present = set(os.listdir(target / old)) if old else set()
    if (
        old
        and present == set(payload)
        and all((target / old / name).read_bytes() == data for name, data in payload.items())
    ):
        return False  # shouldWritePayload false and no paths to remove
    if hidden is None:
        stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
        new = Path(tempfile.mkdtemp(prefix=stamp, dir=target))
    else:
        new = target / hidden
        new.mkdir()
    new.chmod(0o755)
    for name, data in payload.items():
        (new / name).write_bytes(data)
        (new / name).chmod(0o644)
    os.symlink(new.name, target / DATA_TMP)
    os.rename(target / DATA_TMP, target / DATA)
    for name in payload:
        if not (target / name).is_symlink():
            os.symlink(f"{DATA}/{name}", target / name)
    for name in present - set(payload):
        os.remove(target / name)
    if old:
        shutil.rmtree(target / old)
    return True


def install_kubelet_style(live: Path, source: Path, version: str) -> None:
    """What kubelet does to a TLS Secret volume at `live` when the Secret becomes the set in
    `source`; `version` names the new hidden directory ("..v2")."""
    live.mkdir(exist_ok=True)  # the volume's mount point, there before kubelet writes
    atomic_write(live, {name: (source / name).read_bytes() for name in TLS_FILES}, version)


class ConfigMapVolume:
    """A directory updated like kubelet updates a ConfigMap volume; ``path`` is what to serve."""

    def __init__(self, root: Path, text: str):
        root.mkdir()
        self.root = self.path = root
        self.write(text)

    def write(self, text: str) -> None:
        """Publish ``text`` as the ConfigMap's new `policy.yaml`, as kubelet would."""
        atomic_write(self.root, {"policy.yaml": text.encode()})
