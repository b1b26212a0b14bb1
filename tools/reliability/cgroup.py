"""A memory cgroup for the server under test: the container's memory limit, on this machine.

A Pod's memory limit is its container's cgroup limit, and when the processes in it exceed it
the kernel's OOM killer SIGKILLs one of them: the one with the highest badness (resident
memory, page tables and swap, plus `oom_score_adj`), here the worker holding the largest
review. `Cgroup` makes one (cgroup v1's `memory` controller, or v2 where it is mounted
alone), starts a command inside it and reads how many processes the kernel killed. Root only.

One difference from a cluster: on cgroup v2, kubelet since Kubernetes 1.28 sets
`memory.oom.group=1` on each container, and the kernel then kills every process of the
container at once, the gunicorn master with its workers, and kubelet restarts the container
(unless the kubelet runs with `singleProcessOOMKill: true`). Here, as under cgroup v1 or that
setting, only the chosen process dies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Self

V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")


def available() -> str | None:
    """None when a memory cgroup can be made here, else why not."""
    if os.geteuid() != 0:
        return "making a memory cgroup needs root"
    if (V1 / "memory.limit_in_bytes").exists():
        return None
    if "memory" in (V2 / "cgroup.controllers").read_text(errors="replace").split():
        return None
    return "no memory cgroup controller is mounted"


class Cgroup:
    """A memory cgroup of its own with a limit; a context manager that removes it on exit."""

    def __init__(self, name: str, limit_bytes: int) -> None:
        """Create the cgroup `name` limited to `limit_bytes`."""
        self.v1 = (V1 / "memory.limit_in_bytes").exists()
        self.path = (V1 if self.v1 else V2) / name
        self.path.mkdir()
        limit = "memory.limit_in_bytes" if self.v1 else "memory.max"
        (self.path / limit).write_text(str(limit_bytes))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        # Its processes have exited (the server was stopped); an empty cgroup can be removed.
        self.path.rmdir()

    def launcher(self, *command: str) -> tuple[str, ...]:
        """`command` run inside this cgroup: a shell joins it, then execs the command."""
        join = f'echo $$ > {self.path / "cgroup.procs"} && exec "$@"'
        return ("sh", "-c", join, "sh", *command)

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in this cgroup."""
        events = "memory.oom_control" if self.v1 else "memory.events"
        for line in (self.path / events).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0
