"""The directory where prometheus-client's multiprocess mode keeps each worker's metric values.

The master prepares it (``prepare_metrics_dir``) before anything imports
``prometheus_client``, which picks its value store at import time from
``PROMETHEUS_MULTIPROC_DIR``; ``metrics`` reads the same variable to add the workers' files
up. So this module imports nothing of prometheus-client, Flask or the rest of the app: the
master imports it without loading the worker's code.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_metrics_dir() -> tuple[str, bool]:
    """An empty ``PROMETHEUS_MULTIPROC_DIR`` for this server; True when we created it.

    A directory given in the environment is emptied: files left by an earlier server would
    be added to this one's counts. Must run before ``prometheus_client`` is imported.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        return str(path), False
    created = tempfile.mkdtemp(prefix="lwgpu-metrics-")
    os.environ[MULTIPROC_ENV] = created
    return created, True
