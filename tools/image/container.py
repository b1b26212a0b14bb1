"""Running the image as the Deployment runs it, and removing every container started.

The flags are the pod's securityContext: a read-only root with an in-memory /tmp (the
Deployment's emptyDir), no capabilities, no privilege escalation, and the image's own user.
`--runtime runc` because crun refuses the CI machines' hybrid cgroups. Explicit ulimits:
podman's defaults (1048576 files, 4194304 processes) exceed this machine's hard limits, which
runc may not raise, and here runc is refused an nproc above kernel.pid_max as well.
"""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tools.image.programs import podman, podman_ok


def _ulimit(name: str, limit: int, ceiling: Path) -> str:
    """``name=N:N`` with N this machine's hard limit, or the kernel's ``ceiling`` if lower."""
    hard, cap = resource.getrlimit(limit)[1], int(ceiling.read_text())
    value = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    return f"{name}={value}:{value}"


HARDENED = [
    *("--runtime", "runc", "--network", "none"),
    *("--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp:rw,size=64m,mode=1777"),
    *("--cap-drop", "ALL", "--security-opt", "no-new-privileges"),
    *("--ulimit", _ulimit("nofile", resource.RLIMIT_NOFILE, Path("/proc/sys/fs/nr_open"))),
    *("--ulimit", _ulimit("nproc", resource.RLIMIT_NPROC, Path("/proc/sys/kernel/pid_max"))),
]


class Containers:
    """Starts containers of one image under names of this run; `started` removes them all."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.names: list[str] = []

    def _name(self) -> str:
        self.names.append(f"lwgpu-image-test-{os.getpid()}-{len(self.names)}")
        return self.names[-1]

    def start(self, mounts: dict[Path, str], *args: str) -> tuple[str, int]:
        """Start the image detached with ``mounts`` (host directory: container path, read
        only) and ``args`` after the entrypoint; (its name, its PID 1 as this machine sees it)."""
        volumes = [arg for host, path in mounts.items() for arg in ("-v", f"{host}:{path}:ro")]
        name = self._name()
        podman_ok("run", "--detach", "--name", name, *HARDENED, *volumes, self.image, *args)
        return name, int(podman_ok("inspect", "--format", "{{.State.Pid}}", name))

    def once(self, *args: str, entrypoint: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the image to completion with ``args``; its exit status and output."""
        override = ["--entrypoint", entrypoint] if entrypoint else []
        return podman(
            "run", "--rm", "--name", self._name(), *HARDENED, *override, self.image, *args
        )

    def remove_all(self) -> None:
        """Stop and remove every container this object started (those still there)."""
        for name in self.names:
            podman("rm", "--force", "--ignore", "--time", "5", name)


@contextmanager
def started(image: str) -> Iterator[Containers]:
    """Containers of ``image``, all removed on the way out, even after a failure."""
    containers = Containers(image)
    try:
        yield containers
    finally:
        containers.remove_all()
