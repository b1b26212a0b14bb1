"""The decision: one object + the policy that governs it -> allowed, denied or rewritten.

A pure function: no I/O, no globals, no Kubernetes client. The server and the
offline `review` command both call `decide`; `admission` turns its result into
an AdmissionReview response.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from webhook.api.names import GPU_RESOURCE
from webhook.api.text import shorten
from webhook.api.types import KubeObject, PatchOperation
from webhook.api.workload import as_map, dig, field_path, group_of, template_path
from webhook.policy import Policy, Profile

from . import pins
from .annotations import misplaced, skip
from .asks import Ask, Refusal, effective_gpus, pod_mentions_gpu, read_asks
from .edit import Editor
from .lifecycle import left_alone
from .mode import refusal_warnings, rewrite_warning
from .oversize import ignored, left_unchanged, too_big, too_little
from .placement import (
    best_fit,
    fitting,
    own_choice,
    pinned_classes,
    without_selector,
)
from .resources import left_over, no_gpu, typos
from .rewrite import keep_off, rewrite
from .sharing import exclusions, other_system

# `would-mutate` and `would-deny`: what a policy in audit mode (`Policy.mode`) answers where
# enforce mode would rewrite or refuse. The object is admitted as it came.
Outcome = Literal["skipped", "allowed", "mutated", "denied", "would-mutate", "would-deny"]


class Decision(NamedTuple):
    """What to do with one object.

    `outcome` is `skipped` (out of scope), `allowed` (in scope, nothing to change),
    `mutated` (allowed after rewriting: `obj` is the new object, `reason` says what
    changed) or `denied` (`reason` is the refusal for the kubectl user). Under a policy in
    audit mode the last two are `would-mutate` and `would-deny`: allowed, `obj` unchanged,
    no patch, `reason` and `profile` as enforce mode has them, and a warning that says so.
    A named tuple, not a frozen dataclass: as immutable, and four times cheaper to
    build (one per review).
    """

    outcome: Outcome
    obj: Any
    path: tuple[str, ...] = ()  # where the pod template sits; the only part that may change
    reason: str = ""
    warnings: tuple[str, ...] = ()
    profile: str | None = None
    patch: tuple[PatchOperation, ...] = ()  # RFC 6902 operations from the input object to `obj`
    # Each container's GPU ask, as the pod template wrote it; None where they were not read
    # (out of scope) or could not be (the refusal says why). The audit annotations name them.
    asks: tuple[Ask, ...] | None = None

    @property
    def allowed(self) -> bool:
        """False only for a denial."""
        return self.outcome != "denied"


def _skip(obj: Any, reason: str) -> Decision:
    return Decision("skipped", obj, reason=reason)


def decide(
    obj: Any,
    policy: Policy | None,
    *,
    operation: str = "CREATE",
    kind: tuple[str, str] | None = None,
    old: Any = None,
) -> Decision:
    """Decide what to do with `obj` (a Pod or a workload) under `policy`.

    `kind` is the (group, kind) the apiserver reported; by default it is read from
    the object's own apiVersion and kind. `policy` None means the namespace is
    not governed. `old` is the object before an UPDATE (the review's `oldObject`).
    """
    if operation not in ("CREATE", "UPDATE"):
        return _skip(obj, f"operation {operation} is not reviewed")
    if not isinstance(obj, dict):
        return _skip(obj, "no object")
    group, name = kind if kind else (group_of(obj.get("apiVersion")), obj.get("kind"))
    path = template_path(group, name)
    if path is None:
        return _skip(obj, "not a Pod or a workload with a pod template")
    reason = left_alone(obj, old, group, str(name), path, operation)
    if reason is not None:
        return _skip(obj, reason)
    if policy is None:
        return _skip(obj, "namespace not governed by any policy")
    template = dig(obj, path) if path else obj
    spec = as_map(template).get("spec")
    if not isinstance(spec, dict):
        return _skip(obj, "no pod spec")
    annotations = as_map(as_map(template.get("metadata")).get("annotations"))
    outer = as_map(as_map(obj.get("metadata")).get("annotations"))
    prefix = field_path(path) + "." if path else ""
    skipped, notes = skip(annotations, outer, str(name), prefix, policy)
    if skipped is not None:
        return Decision("skipped", obj, reason=skipped, warnings=notes)
    notes += misplaced(outer, annotations, policy, str(name), prefix)
    decision = _decide_in_scope(obj, path, spec, template, annotations, policy, prefix)
    if notes:
        decision = decision._replace(warnings=notes + decision.warnings)
    return _audited(obj, decision) if policy.mode == "audit" else decision


def _audited(obj: KubeObject, decision: Decision) -> Decision:
    """Audit mode's answer to what enforce mode decided: the object as it came. The rewrite's
    warning already says `would rewrite` (`_mutated`); a refusal becomes one."""
    if decision.outcome == "mutated":
        return decision._replace(outcome="would-mutate", obj=obj, patch=())
    if decision.outcome == "denied":
        refusal = refusal_warnings(decision.reason)
        return decision._replace(outcome="would-deny", warnings=refusal + decision.warnings)
    return decision


def _decide_in_scope(
    obj: KubeObject,
    path: tuple[str, ...],
    spec: KubeObject,
    template: KubeObject,
    annotations: KubeObject,
    policy: Policy,
    prefix: str,
) -> Decision:
    """The decision for an object the policy governs and no annotation skips."""
    if not (policy.annotation in annotations or pod_mentions_gpu(spec, policy)):
        reason, warnings = no_gpu(spec, policy)
        return Decision("skipped", obj, reason=reason, warnings=warnings)
    theirs = other_system(spec, as_map(as_map(template.get("metadata")).get("labels")), policy)
    if theirs is not None:
        return _skip(obj, theirs)
    asks: tuple[Ask, ...] | None = None
    try:
        asks = tuple(read_asks(spec, annotations, policy, prefix))
        decision = _decide_gpu_pod(obj, path, spec, asks, annotations, policy, prefix)
    except Refusal as refusal:
        decision = Decision("denied", obj, path, reason=str(refusal))
    if decision.outcome == "mutated" and decision.profile is not None:
        # Rewritten onto a class: what the new pod still asks that no such node offers.
        extra = left_over(as_map(as_map(dig(decision.obj, path)).get("spec")), policy)
    else:
        extra = typos(spec, policy)
    return decision._replace(warnings=decision.warnings + extra, asks=asks)


def _decide_gpu_pod(
    obj: KubeObject,
    path: tuple[str, ...],
    spec: KubeObject,
    asks: tuple[Ask, ...],
    annotations: KubeObject,
    policy: Policy,
    prefix: str,
) -> Decision:
    sized = [(a, a.memory_mib) for a in asks if a.memory_mib is not None]
    if not sized:
        return _whole_gpus(obj, path, spec, asks, policy, prefix)
    _check_count(asks, effective_gpus(asks), policy, prefix)
    biggest, memory = max(sized, key=lambda pair: pair[1])
    own = own_choice(annotations, spec, policy.profiles)
    fits = _choose(spec, own, policy, prefix, biggest, memory)
    if not fits:
        reason = ignored(biggest, memory, policy)
        return Decision("allowed", obj, path, reason, (left_unchanged(biggest, memory, policy),))
    choice, spread = fits[0], fits if policy.placement == "spillOver" else []
    edit = rewrite(obj, path, spec, [a for a, _ in sized], choice, policy, own, spread)
    if not edit.ops:
        return Decision(
            "allowed", obj, path, f"already rewritten for {choice.name}", (), choice.name
        )
    node_name = spec.get("nodeName")
    if node_name:
        raise Refusal(
            f"{prefix}spec.nodeName: the pod is bound to node {shorten(node_name)!r} "
            f"but must be placed on lightweight GPU class {choice.name}; remove spec.nodeName"
        )
    target = f"-> {GPU_RESOURCE}=1 on {choice.name}"
    spill = ", spilling over to " + ", ".join(p.name for p in spread[1:]) if spread[1:] else ""
    change = f"{biggest.source} ({memory}Mi) {target} ({choice.selector_text}){spill}"
    # Audit mode's warning leaves the MiB and the selector out: after "would rewrite" they no
    # longer fit the 120 characters of a warning, and the class's name says where it goes.
    would = f"rewrite {biggest.source} {target}{spill}"
    decision = _mutated(edit, path, change, would, policy, choice.name)
    small = tuple(w for a, _ in sized if (w := too_little(a, policy)) is not None)
    return decision._replace(warnings=decision.warnings + small) if small else decision


def _whole_gpus(
    obj: KubeObject,
    path: tuple[str, ...],
    spec: KubeObject,
    asks: tuple[Ask, ...],
    policy: Policy,
    prefix: str,
) -> Decision:
    """A pod that asks no memory: already in lightweight form when it pins a class."""
    classes = pinned_classes(spec, policy.profiles)
    if not classes:
        gpus = effective_gpus(asks)
        if policy.whole_gpu_pods == "avoidLightweight" and gpus > 0:
            return _kept_off(obj, path, spec, gpus, policy)
        return Decision("allowed", obj, path, reason="asks whole GPUs, not a lightweight class")
    _check_count(asks, effective_gpus(asks), policy, prefix)
    return Decision(
        "allowed",
        obj,
        path,
        reason="already in lightweight form",
        profile=classes[0].name if len(classes) == 1 else None,
    )


def _kept_off(
    obj: KubeObject, path: tuple[str, ...], spec: KubeObject, gpus: int, policy: Policy
) -> Decision:
    """A whole-GPU pod kept off every lightweight class (`wholeGPUPods: avoidLightweight`)."""
    expressions = exclusions(policy)
    edit = keep_off(obj, path, spec, expressions)
    if not edit.ops:
        return Decision("allowed", obj, path, reason="already kept off lightweight GPU classes")
    change = (
        f"{GPU_RESOURCE}={gpus} kept off lightweight GPU classes ("
        + "; ".join(f"{e['key']} NotIn {','.join(e['values'])}" for e in expressions)
        + ")"
    )
    would = f"keep {GPU_RESOURCE}={gpus} off lightweight GPU classes"
    return _mutated(edit, path, change, would, policy)


def _mutated(
    edit: Editor,
    path: tuple[str, ...],
    change: str,
    would: str,
    policy: Policy,
    profile: str | None = None,
) -> Decision:
    """The rewritten object and its patch; `change` is the reason and the warning, `would`
    audit mode's warning (`mode.rewrite_warning`)."""
    return Decision(
        "mutated",
        edit.root,
        path,
        reason=change,
        warnings=(rewrite_warning(policy, change, would),),
        profile=profile,
        patch=tuple(edit.ops),
    )


def _choose(
    spec: KubeObject,
    own: Profile | None,
    policy: Policy,
    prefix: str,
    biggest: Ask,
    memory: int,
) -> list[Profile]:
    """The classes that hold `memory` among those the pod still admits, smallest first.

    Empty when no class holds it and the policy leaves such pods alone; a `Refusal` when
    the pod pins classes no policy offers or too small for its ask, or asks too much.
    """
    # The webhook's own earlier selector is no pin: a changed ask chooses again.
    base = without_selector(spec, own) if own else spec
    pinned = pinned_classes(base, policy.profiles)
    admitted = policy.profiles if pinned is None else tuple(pinned)
    if pinned == []:
        raise pins.unknown(base, policy, prefix)
    fits = fitting(admitted, memory)
    if fits:
        return fits
    # Only a pinned pod can miss a class that holds it: the one it should pin instead.
    instead = best_fit(policy.profiles, memory) if pinned is not None else None
    if instead is not None:
        raise pins.too_small(base, policy, admitted, instead, biggest, memory, prefix)
    if policy.when_no_profile_fits == "ignore":
        return []
    raise Refusal(too_big(biggest, memory, policy, prefix))


def _check_count(asks: tuple[Ask, ...], gpus: int, policy: Policy, prefix: str) -> None:
    if gpus <= policy.max_gpus_per_pod:
        return
    users = ", ".join(f"{a.where}: {a.gpus}" for a in asks[:6])
    raise Refusal(
        f"{prefix}spec: the pod needs {gpus} GPUs ({users}), but a lightweight GPU node "
        f"carries exactly one GPU (policy {policy.name!r} allows {policy.max_gpus_per_pod} per "
        f"pod); ask for {GPU_RESOURCE}: 1 or GPU memory in one container, or split the pod"
    )
