"""Where the built control-plane binaries live, and which versions they are.

The binaries and the Go caches stay outside the checkout (`LWGPU_KUBE_CACHE`, default
`~/.cache/lwgpu`), so a fresh clone, as CI makes one, reuses what an earlier build left.
`build.sh` is told the versions and the directory by `build()`: this module is the one place
that names them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

KUBE_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.0"
NAMES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet-atomic-writer",  # kubelet's AtomicWriter, see kube/atomicwriter/main.go
)
HOW_TO_BUILD = "build them with `make cluster` (about 8 minutes the first time, then cached)"
BUILD_SCRIPT = Path(__file__).with_name("build.sh")


def cache_dir() -> Path:
    """The root of everything the build keeps: binaries and both Go caches."""
    if configured := os.environ.get("LWGPU_KUBE_CACHE"):
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lwgpu"


def bin_dir() -> Path:
    """Where this version's binaries are."""
    return cache_dir() / "kube" / KUBE_VERSION / "bin"


def path(name: str) -> Path:
    """One binary's path (it may not exist: see `missing`)."""
    return bin_dir() / name


def missing() -> list[str]:
    """The binaries not built yet."""
    return [name for name in NAMES if not path(name).is_file()]


def build() -> int:
    """Run build.sh for these versions into this cache; its exit status."""
    env = dict(
        os.environ,
        KUBE_VERSION=KUBE_VERSION,
        ETCD_VERSION=ETCD_VERSION,
        LWGPU_KUBE_CACHE=str(cache_dir()),
        LWGPU_KUBE_BIN=str(bin_dir()),
    )
    return subprocess.run(["bash", str(BUILD_SCRIPT)], env=env, check=False).returncode
