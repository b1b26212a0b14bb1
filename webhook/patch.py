"""RFC 6902 JSON Patch for a decision: the operations the decision's editor recorded."""

from __future__ import annotations

from .decision import Decision


def patch_ops(original: dict, decision: Decision) -> list[dict]:
    """The operations that turn `original` (the decided object) into `decision.obj`."""
    return list(decision.patch)
