"""`go build` of one of the repository's Go programs with the local toolchain, or why not.

Two tools build Go here: the benchmark's peers (tools/bench/golang.py: standard library only,
offline) and the CEL cost counter (tools/cel_cost.py: k8s.io/apiserver from the control-plane
build's module cache). Each chooses its environment; this runs the build the same way for
both and says why it failed in one line.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

NO_GO = "go is not installed (Go 1.26+; Debian: apt-get install -y golang-go)"
ERROR_TAIL = 800  # characters of the compiler's output kept in the reason


def go_build(
    source: Path,
    binary: Path,
    env: Mapping[str, str],
    *,
    flags: tuple[str, ...] = (),
    timeout_s: float = 300,
) -> str:
    """Build the package in `source` into `binary` under `env`: "" when it built, else why."""
    go = shutil.which("go")
    if go is None:
        return NO_GO
    done = subprocess.run(
        [go, "build", *flags, "-o", str(binary), "."],
        cwd=source,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        return f"go build failed ({done.returncode}): {done.stderr.strip()[-ERROR_TAIL:]}"
    return ""
