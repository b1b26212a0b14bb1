"""The rewrite: a pod template that asks GPU memory becomes one that asks one lightweight GPU.

Each container that asked memory gets `nvidia.com/gpu` in its limits (and requests, where
it named GPU resources there), loses the memory and companion resources, and the template
gets the chosen class's selector and tolerations and two annotations saying what was done.
A selector the webhook wrote for an earlier choice (`replaced`) is taken out first.
"""

from __future__ import annotations

from typing import Any

import orjson

from webhook.api import quantity
from webhook.api.names import FROM_ANNOTATION, GPU_RESOURCE, PROFILE_ANNOTATION
from webhook.api.text import AUDIT_LIMIT
from webhook.api.types import KubeObject
from webhook.api.workload import pointer
from webhook.policy import Policy, Profile

from . import spill
from .asks import Ask
from .edit import Editor, Path

# With fewer asking containers in one list, the patch is one operation per field: what a
# person reading the patch expects, and no list is measured. With more, `rewrite` sends the
# whole list where that is shorter (`_whole_list_is_shorter`).
MANY_ASKS = 32
# The bytes of one operation besides its path: `{"op":"remove","path":"/resources/limits/
# aliyun.com~1gpu-mem"}` and `{"op":"add",...,"value":"1"}` take about this many.
OPERATION_BYTES = 60


def _set_count(edit: Editor, held: Any, path: Path, count: int) -> None:
    """Set `path` (a GPU count in limits or requests, currently in map `held`) to `count`."""
    current = held.get(GPU_RESOURCE) if isinstance(held, dict) else None
    try:
        have = None if current is None else quantity.count(current)
    except quantity.QuantityError:
        have = None
    if have != count:
        edit.set(path, str(count))


def rewrite(
    obj: KubeObject,
    path: tuple[str, ...],
    template_spec: KubeObject,
    memory_asks: list[Ask],
    choice: Profile,
    policy: Policy,
    replaced: Profile | None = None,
    spread: list[Profile] | None = None,
) -> Editor:
    """Rewrite the pod template at `path` copy-on-write; the editor holds object and patch.

    With `spread` (spill-over placement) the pod gets node affinity over those classes
    instead of `choice`'s nodeSelector, and the tolerations of them all: it may land on any.
    """
    edit = Editor(obj)
    spec = (*path, "spec")
    removed = (*policy.memory_resources, *policy.companion_resources)
    for listed in {ask.section for ask in memory_asks}:
        asking = sum(1 for ask in memory_asks if ask.section == listed)
        if _whole_list_is_shorter(template_spec[listed], asking, (*spec, listed)):
            edit.take_over((*spec, listed))
    for ask in memory_asks:
        resources: Path = (*spec, ask.section, ask.position, "resources")
        # Read from the input: the edits so far changed other containers, not this one.
        current = template_spec[ask.section][ask.position].get("resources")
        if not isinstance(current, dict):
            edit.set(resources, {"limits": {GPU_RESOURCE: str(ask.gpus)}})
            continue
        # Read once before editing: each edit below changes one key these maps do not reread.
        limits, requests = current.get("limits"), current.get("requests")
        names_gpu = isinstance(requests, dict) and (
            GPU_RESOURCE in requests or any(r in requests for r in policy.memory_resources)
        )
        for section, held in (("limits", limits), ("requests", requests)):
            if isinstance(held, dict):
                for resource in removed:
                    if resource in held:
                        edit.remove((*resources, section, resource))
        if isinstance(limits, dict):
            _set_count(edit, limits, (*resources, "limits", GPU_RESOURCE), ask.gpus)
        else:
            edit.set((*resources, "limits"), {GPU_RESOURCE: str(ask.gpus)})
        if names_gpu:
            _set_count(edit, requests, (*resources, "requests", GPU_RESOURCE), ask.gpus)
    kept = {} if spread else choice.node_selector
    for key in replaced.node_selector if replaced else ():
        if key not in kept:
            edit.remove((*spec, "nodeSelector", key))
    if spread:
        spill.spread(edit, path, template_spec, spread)
    else:
        edit.merge((*spec, "nodeSelector"), dict(choice.node_selector))
    for toleration in (t for profile in spread or [choice] for t in profile.tolerations):
        edit.ensure((*spec, "tolerations"), list)
        if dict(toleration) not in edit.get((*spec, "tolerations")):
            edit.append((*spec, "tolerations"), dict(toleration))
    several = len(memory_asks) > 1
    annotations: dict[str, str] = {PROFILE_ANNOTATION: choice.name}
    # A second review of the same choice keeps the audit trail of the first: what the pod
    # asked before the rewrite (an init container's ask is gone by then, for one).
    existing = edit.get((*path, "metadata", "annotations"))
    recorded = isinstance(existing, dict) and isinstance(existing.get(FROM_ANNOTATION), str)
    if replaced != choice or not recorded:
        annotations[FROM_ANNOTATION] = _audit_trail(memory_asks, several)
    edit.ensure((*path, "metadata"), dict)
    edit.merge((*path, "metadata", "annotations"), annotations)
    return edit


def _whole_list_is_shorter(items: list[Any], asking: int, path: Path) -> bool:
    """Whether one `replace` of the container list is a shorter patch than two operations
    (remove the memory, set the GPU count) for each of its `asking` containers."""
    if asking < MANY_ASKS:
        return False
    per_ask = 2 * (len(pointer(path)) + OPERATION_BYTES)
    return len(orjson.dumps(items)) < asking * per_ask


def _audit_trail(memory_asks: list[Ask], several: bool) -> str:
    """What the pod asked, for `lwgpu.io/rewritten-from`: at most `AUDIT_LIMIT` characters.

    The apiserver refuses a pod whose annotations total more than 256 KiB
    (apimachinery/pkg/api/validation/objectmeta.go, ValidateAnnotationsSize), so a pod of
    thousands of asking containers names the first few and counts the rest.
    """
    entries = [f"{a.name}:{a.source}" if several else str(a.source) for a in memory_asks]
    text = ",".join(entries)
    if len(text) <= AUDIT_LIMIT:
        return text
    kept, length = 0, 0
    while length + len(entries[kept]) + 1 <= AUDIT_LIMIT - 24:
        length += len(entries[kept]) + 1
        kept += 1
    return ",".join(entries[:kept]) + f",... and {len(entries) - kept} more"


_REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def keep_off(
    obj: KubeObject,
    path: tuple[str, ...],
    template_spec: KubeObject,
    expressions: list[dict[str, Any]],
) -> Editor:
    """Add `expressions` to every required node selector term that lacks them.

    A pod without required terms gets one holding just these. Expressions already in a
    term are not added again, so a second review (reinvocation) changes nothing.
    """
    edit = Editor(obj)
    required = (*path, "spec", *_REQUIRED)
    terms: Any = template_spec
    for key in (*_REQUIRED, "nodeSelectorTerms"):
        terms = terms.get(key) if isinstance(terms, dict) else None
    if not (isinstance(terms, list) and terms):
        for depth in range(1, len(_REQUIRED) + 1):
            edit.ensure((*path, "spec", *_REQUIRED[:depth]), dict)
        edit.set((*required, "nodeSelectorTerms"), [{"matchExpressions": _copies(expressions)}])
        return edit
    for index, term in enumerate(terms):
        where: Path = (*required, "nodeSelectorTerms", index)
        present = term.get("matchExpressions") if isinstance(term, dict) else None
        if not isinstance(term, dict):
            edit.set(where, {"matchExpressions": _copies(expressions)})
        elif not isinstance(present, list):
            edit.set((*where, "matchExpressions"), _copies(expressions))
        else:
            for expression in expressions:
                if expression not in present:
                    edit.append((*where, "matchExpressions"), _copies([expression])[0])
    return edit


def _copies(expressions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The editor takes over what it is handed: every term gets objects of its own.
    return [{**e, "values": list(e["values"])} for e in expressions]
