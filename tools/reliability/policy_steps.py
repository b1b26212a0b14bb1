"""The policy-file faults of `faults.py`: a valid edit, four bad states, a restore.

Each `Step` changes the live policy file in place, as an admin's editor or a broken
rollout would (kubelet's ConfigMap symlink swap is covered by tests/server/test_policy.py),
and says which /metrics counter moves once per worker when the server has seen it, and for
a valid state which class the load's review (2 GiB of GPU memory) must then get.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from webhook.policy import load_documents

# The last good policy of the run: the two small classes are gone, so a 2 GiB ask now gets
# GRID-P4-4Q. Answers naming it prove the server decides with this policy, not the first.
EDITED = """\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: default}
spec:
  profiles:
  - {name: GRID-P4-4Q, memory: 4096Mi}
  - {name: GRID-P4-8Q, memory: 8192Mi}
"""
EDITED_PROFILE = "GRID-P4-4Q"
RELOADS = "lwgpu_policy_reloads_total"
FAILURES = "lwgpu_policy_reload_failures_total"


@dataclass(frozen=True)
class Step:
    """One change to the policy file."""

    name: str
    apply: Callable[[], object]
    metric: str  # the counter each worker increments once it has seen the change
    profile: str | None  # the class answers name afterwards (None: unchanged, a bad state)


def _bad(text: str) -> str:
    errors: list[str] = []
    load_documents(text, "step", errors)
    assert errors, f"meant to be an invalid policy: {text!r}"
    return text


def policy_steps(live: Path) -> Iterator[Step]:
    """The steps against the file `live`, in order; each is applied by the caller."""
    corrupt = _bad(EDITED.replace("profiles:", "profiles: {[") + "\x00\xff")
    truncated = _bad(EDITED[: len(EDITED) * 2 // 3])
    yield Step("edit", lambda: live.write_text(EDITED), RELOADS, EDITED_PROFILE)
    yield Step("corrupt", lambda: live.write_bytes(corrupt.encode("latin-1")), FAILURES, None)
    yield Step("truncate", lambda: live.write_text(truncated), FAILURES, None)
    yield Step("empty", lambda: live.write_bytes(b""), FAILURES, None)
    yield Step("delete", live.unlink, FAILURES, None)
    yield Step("restore", lambda: live.write_text(EDITED), RELOADS, EDITED_PROFILE)
