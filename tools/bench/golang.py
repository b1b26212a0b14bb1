"""Build the Go peers (`tools/bench/peers/`) with the local Go toolchain, offline.

The peers use the standard library only and their `go.mod` requires nothing, so the build
needs no module proxy: `GOPROXY=off` makes a missing dependency an error instead of a
download. Go's build cache and module path live under the git-ignored `build/go/`, so the
build writes nothing outside the checkout and a second run reuses the first one's work.
Without `go` on PATH the peers are skipped and the reason is reported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tools.paths import REPO
from webhook.policy import PolicySet

SOURCE = Path(__file__).resolve().parent / "peers"
BUILD = REPO / "build" / "go"
BUILD_TIMEOUT_S = 300


def build() -> tuple[Path | None, str]:
    """The peer binary and "" when it built; None and why when it did not."""
    go = shutil.which("go")
    if go is None:
        return None, "go is not installed (Debian: apt-get install -y golang-go)"
    binary = BUILD / "benchpeer"
    env = {
        **os.environ,
        "GOCACHE": str(BUILD / "cache"),
        "GOPATH": str(BUILD / "path"),
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GO111MODULE": "on",
    }
    done = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=SOURCE,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        return None, f"go build failed ({done.returncode}): {done.stderr.strip()[-500:]}"
    return binary, ""


def profiles_json(policies: PolicySet) -> dict[str, Any]:
    """What the Go webhook decides with: the first policy's name, classes and memory
    resources."""
    policy = policies.policies[0]
    return {
        "profiles": [
            {
                "name": p.name,
                "memoryMiB": p.memory_mib,
                "nodeSelector": dict(p.node_selector),
                "selectorText": p.selector_text,
            }
            for p in policy.profiles
        ],
        "resources": dict(policy.memory_resources),
        "policy": policy.name,
    }
