"""Build the Go peers (`tools/bench/peers/`) with the local Go toolchain, offline.

The peers use the standard library only and their `go.mod` requires nothing, so the build
needs no module proxy: `GOPROXY=off` makes a missing dependency an error instead of a
download. Go's build cache and module path live under the git-ignored `build/go/`, so the
build writes nothing outside the checkout and a second run reuses the first one's work.
Without `go` on PATH the peers are skipped and the reason is reported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tools.go_build import go_build
from tools.paths import REPO
from webhook.policy import PolicySet

SOURCE = Path(__file__).resolve().parent / "peers"
BUILD = REPO / "build" / "go"
BUILD_TIMEOUT_S = 300


def build() -> tuple[Path | None, str]:
    """The peer binary and "" when it built; None and why when it did not."""
    binary = BUILD / "benchpeer"
    env = {
        **os.environ,
        "GOCACHE": str(BUILD / "cache"),
        "GOPATH": str(BUILD / "path"),
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GO111MODULE": "on",
    }
    why = go_build(SOURCE, binary, env, timeout_s=BUILD_TIMEOUT_S)
    return (None, why) if why else (binary, "")


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
