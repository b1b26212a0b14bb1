"""The programs `make image-test` needs, and running them with their output kept in a log.

podman builds and runs the image (with runc: crun refuses the hybrid cgroups of the CI
machines), mmdebstrap makes the base image without a registry, nsenter reaches a container's
loopback. As root, missing ones are installed with apt-get (CI runs as root on a clean
machine); otherwise the test cannot run here and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

PROGRAMS = ("podman", "runc", "mmdebstrap", "nsenter")
APT_PACKAGES = ("podman", "runc", "mmdebstrap")


class StepFailed(Exception):
    """A step that must work did not; the message ends with the tail of its log."""


def run_logged(command: list[str], log: Path, timeout: float) -> None:
    """Run ``command`` with its output appended to ``log``; StepFailed unless it exits 0."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        try:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise StepFailed(f"{command[0]} ran past {timeout:.0f} s{_tail(log)}") from None
    if done.returncode != 0:
        raise StepFailed(f"{' '.join(command[:2])} exited {done.returncode}{_tail(log)}")


def _tail(log: Path, lines: int = 25) -> str:
    last = log.read_text(errors="replace").splitlines()[-lines:]
    return f"; the end of {log}:\n" + "\n".join(f"    {line}" for line in last)


def missing() -> list[str]:
    """The programs not on PATH."""
    return [program for program in PROGRAMS if shutil.which(program) is None]


def ensure(log: Path) -> tuple[str | None, str]:
    """(why the test cannot run here or None, what was done). Installs what is missing when
    running as root; StepFailed when that installation fails."""
    absent = missing()
    if not absent:
        return None, "already installed"
    if os.geteuid() != 0:
        return f"{', '.join(absent)} not installed, and not root to apt-get install them", ""
    if shutil.which("apt-get") is None:
        return f"{', '.join(absent)} not installed, and no apt-get here to install them", ""
    os.environ["DEBIAN_FRONTEND"] = "noninteractive"
    log.write_text("")
    run_logged(["apt-get", "update"], log, timeout=600)
    run_logged(["apt-get", "install", "-y", *APT_PACKAGES], log, timeout=1200)
    if missing():
        raise StepFailed(f"still missing after apt-get install: {', '.join(missing())}")
    return None, f"installed {', '.join(absent)} with apt-get"


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``podman ARGS``, output captured as text; the caller reads the exit status."""
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, check=False, timeout=timeout
    )


def podman_ok(*args: str, timeout: float = 120) -> str:
    """``podman ARGS``'s standard output; StepFailed unless it exits 0."""
    done = podman(*args, timeout=timeout)
    if done.returncode != 0:
        raise StepFailed(f"podman {' '.join(args[:2])} exited {done.returncode}: {done.stderr}")
    return done.stdout.strip()
