"""Secret and ConfigMap volumes written as kubelet writes them: by kubelet's own AtomicWriter
(`pkg/volume/util/atomic_writer.go`), built as `kubelet-atomic-writer` (kube/atomicwriter/).

A reader going through the volume sees the old set of files or the new one, never a mix;
writing the same payload again changes nothing. `defaultMode` is the volume's (0644 unless
the pod says otherwise).
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

from tools.cluster import binaries

DEFAULT_MODE = 0o644


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
