"""RFC 6902 JSON Patch from an original object to the decision's rewritten one.

Only the pod template can change, so `jsonpatch` diffs that subtree alone and the
operations are re-rooted at its JSON pointer (`/spec/template/...`); keys with
`/` or `~` are escaped by `jsonpatch` itself.
"""

from __future__ import annotations

import jsonpatch

from .decision import Decision
from .workload import dig, pointer


def patch_ops(original: dict, decision: Decision) -> list[dict]:
    """The operations that turn `original` into `decision.obj`; [] when nothing changed."""
    if decision.outcome != "mutated":
        return []
    before = dig(original, decision.path) if decision.path else original
    after = dig(decision.obj, decision.path) if decision.path else decision.obj
    root = pointer(decision.path)
    ops = jsonpatch.make_patch(before, after).patch
    return [{**op, "path": root + op["path"],
             **({"from": root + op["from"]} if "from" in op else {})} for op in ops]
