"""The rewrite in the apiserver as one JSON patch: `webhook.core.rewrite` in CEL.

Each container that asks GPU memory loses the policy's memory and companion resources and
gets `nvidia.com/gpu` in its limits (and in its requests where it named GPU resources there);
the pod template gets the chosen class's nodeSelector (taking out the webhook's earlier
choice), its tolerations and the `lwgpu.io/profile` and `lwgpu.io/rewritten-from`
annotations. Every operation is written only where the object differs from its result, so a
second evaluation of a rewritten object (`reinvocationPolicy: IfNeeded`) patches nothing.
A whole-GPU pod that pins no class gets the policy's keep-off affinity instead
(`wholeGPUPods: avoidLightweight`, `webhook.compile.keep_off`).

Variables cannot build JSONPatch values (the apiserver declares those types for mutation
expressions only), so they hold the paths and plain values, and `mutation` turns them into
operations; a toleration, whose fields are not all strings, is an object literal of the
mutation itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from webhook.api.names import FROM_ANNOTATION, GPU_RESOURCE, PROFILE_ANNOTATION
from webhook.policy import PolicySet, Profile

from .cel import Named, all_of, choose, dig, escaped, instance, pointer_literal, string
from .checks import GPU
from .keep_off import SPEC, avoids, keep_off

PROFILE, FROM = string(PROFILE_ANNOTATION), string(FROM_ANNOTATION)
ANNOTATIONS = "variables.templatePointer + '/metadata/annotations'"


def _count_is(held: str, gpus: str) -> str:
    """The map `held` already asks `gpus` GPUs (`rewrite._set_count`)."""
    value = f"string({held}[{GPU}])"
    return (
        f"({GPU} in {held} && isQuantity({value}) && quantity({value}).isInteger()"
        f" && quantity({value}).asInteger() == {gpus})"
    )


def _unique(items: Sequence[Mapping[str, object]]) -> list[Mapping[str, object]]:
    """Each toleration once: the webhook appends a second equal one never (it is in by then)."""
    found: list[Mapping[str, object]] = []
    for item in items:
        if dict(item) not in [dict(f) for f in found]:
            found.append(item)
    return found


def _literal(value: object) -> str:
    return string(value) if isinstance(value, str) else str(value)


def _toleration(toleration: Mapping[str, object]) -> str:
    return instance(("spec", "tolerations"), {k: _literal(v) for k, v in toleration.items()})


def _tolerated(toleration: Mapping[str, object]) -> str:
    """The pod already holds this toleration, every field equal (`dict in list`)."""
    fields = " && ".join(
        f"{string(k)} in x && x[{string(k)}] == {_literal(v)}" for k, v in toleration.items()
    )
    return f"variables.tolerations.exists(x, size(x) == {len(toleration)} && {fields})"


def _by_class(policies: PolicySet, render: Callable[[Profile], str | None], otherwise: str) -> str:
    """A value of the chosen class of the governing policy; `otherwise` where `render` has
    none."""
    several = len(policies.policies) > 1
    cases = []
    for i, policy in enumerate(policies.policies):
        for c, profile in enumerate(policy.profiles):
            text = render(profile)
            if text is not None:
                chosen = f"variables.choice == {c}"
                cases.append(
                    (f"(variables.governing == {i} && {chosen})" if several else chosen, text)
                )
    return choose(cases, otherwise)


def _tolerations(policies: PolicySet, render: Callable[[Mapping[str, object]], str]) -> str:
    def listed(profile: Profile) -> str | None:
        unique = _unique(profile.tolerations)
        return "[" + ", ".join(map(render, unique)) + "]" if unique else None

    return _by_class(policies, listed, "[]")


def tolerates(policies: PolicySet) -> bool:
    """Some class has tolerations to add."""
    return any(p.tolerations for policy in policies.policies for p in policy.profiles)


def _resource_changes() -> tuple[str, str, str]:
    """(removals, string additions, map additions) of the asking containers' resources."""
    at = "variables.askPointers[a]"
    limits, requests = "variables.limits[i]", "variables.requests[i]"
    gpus = "variables.gpus[i]"
    gpu_key = pointer_literal((GPU_RESOURCE,))
    names_gpu = f"({GPU} in {requests} || variables.memoryResources.exists(r, r in {requests}))"
    removals = (
        "variables.asking.transformList(a, i,\n"
        + "\n  + ".join(
            f"variables.removedResources.filter(r, r in {held})"
            f".map(r, {at} + '/{section}/' + {escaped('r')})"
            for section, held in (("limits", limits), ("requests", requests))
        )
        + ").flatten()"
    )
    additions = (
        f"variables.asking.transformList(a, i, size({limits}) > 0"
        f" && !{_count_is(limits, gpus)},\n  [{at} + '/limits' + {gpu_key}, string({gpus})])"
        f"\n+ variables.asking.transformList(a, i, {names_gpu} && !{_count_is(requests, gpus)},"
        f"\n  [{at} + '/requests' + {gpu_key}, string({gpus})])"
    )
    maps = (
        f"variables.asking.transformList(a, i, size({limits}) == 0,"
        f" {{{at} + '/limits': {{{GPU}: string({gpus})}}}})"
    )
    return removals, additions, maps


def _annotation_changes() -> str:
    """[path, string] pairs of the two annotations, in a map that holds some already."""
    held = "variables.annotations"
    name, trail = "variables.classNames[variables.choice]", "variables.auditTrail"
    changes = [
        (PROFILE_ANNOTATION, [], name),
        (FROM_ANNOTATION, ["variables.recordsTrail"], trail),
    ]
    return " + ".join(
        f"({all_of([*wanted, f'(!({string(key)} in {held}) || {held}[{string(key)}] != {value})'])}"
        f"\n  ? [[{ANNOTATIONS} + {pointer_literal((key,))}, {value}]] : [])"
        for key, wanted, value in changes
    )


def patch_variables(policies: PolicySet) -> list[Named]:
    """The operations' paths and values, and whether to rewrite (or keep off) at all."""
    init = "size(variables.initContainers)"
    chosen = "variables.chosenSelector"
    selector = f"{SPEC} + '/nodeSelector'"
    name = "variables.classNames[variables.choice]"
    trail = "variables.auditTrail"
    removals, additions, maps = _resource_changes()
    changes = "size(variables.removals) + size(variables.stringAdds) + size(variables.mapAdds)"
    variables: list[Named] = [
        {"name": "specPointer", "expression": "variables.templatePointer + '/spec'"},
        {"name": "asking", "expression": "variables.memoryAsked.transformList(i, a, a, i)"},
        {
            "name": "askPointers",
            "expression": f"variables.asking.map(i, {SPEC} + (i < {init}"
            f" ? '/initContainers/' + string(i)\n  : '/containers/' + string(i - {init}))"
            " + '/resources')",
        },
        {"name": "chosenSelector", "expression": "variables.classSelectors[variables.choice]"},
        {
            # the webhook's own earlier selector keys that the new class does not select
            "name": "removals",
            "expression": f"{removals}\n+ variables.ownKeys.filter(k, !(k in {chosen})"
            f" && k in variables.selector).map(k, {selector} + '/' + {escaped('k')})",
        },
        {
            # a new choice, or a first one, records what the pod asked
            "name": "recordsTrail",
            "expression": "variables.own != variables.choice"
            f" || !({FROM} in variables.annotations)",
        },
        {
            # [path, string] pairs
            "name": "stringAdds",
            "expression": f"{additions}\n+ (size(variables.selector) > 0 ? {chosen}.filter(k,"
            f" !(k in variables.selector)\n  || variables.selector[k] != {chosen}[k])"
            f".map(k, [{selector} + '/' + {escaped('k')}, {chosen}[k]]) : [])"
            f"\n+ (size(variables.annotations) > 0 ? {_annotation_changes()} : [])",
        },
        {
            # {path: map of strings} where the map is missing or empty
            "name": "mapAdds",
            "expression": f"{maps}\n+ (size(variables.selector) == 0 ? [{{{selector}: {chosen}}}]"
            f" : [])\n+ (size(variables.annotations) == 0 ? [{{{ANNOTATIONS}: {{{PROFILE}: {name},"
            f" {FROM}: {trail}}}}}] : [])",
        },
        {
            "name": "boundToNode",
            "expression": dig("variables.spec", ("nodeName",), "''") + " != ''",
        },
    ]
    if tolerates(policies):
        variables += [
            {"name": "tolerations", "expression": dig("variables.spec", ("tolerations",), "[]")},
            {
                # per toleration of the chosen class, whether the pod lacks it
                "name": "tolerationsMissing",
                "expression": _tolerations(policies, lambda t: f"!{_tolerated(t)}"),
            },
        ]
        changes += " + size(variables.tolerationsMissing.filter(m, m))"
    asks_well = "variables.decided && variables.wellFormed.all(ok, ok) && variables.annotationValid"
    variables += [
        {
            # the webhook would rewrite (`decision._decide_gpu_pod`): memory asked, no refusal
            # before the operations
            "name": "rewritable",
            "expression": f"{asks_well}\n&& variables.memoryAsked.exists(a, a)"
            " && variables.neededGPUs <= variables.maxGPUs && variables.choice >= 0",
        },
        {"name": "changes", "expression": changes},
        {
            # and the last refusal: a pod bound to a node is not moved to a class
            "name": "rewrites",
            "expression": "variables.rewritable"
            " && !(variables.boundToNode && variables.changes > 0)",
        },
    ]
    if avoids(policies):
        variables.append(
            {
                # `decision._whole_gpus`: whole GPUs asked, no class pinned
                "name": "keepsOff",
                "expression": f"variables.avoidsLightweight && {asks_well}"
                "\n&& !variables.memoryAsked.exists(a, a) && variables.neededGPUs > 0"
                " && (variables.pinsNone || !variables.admitted.exists(a, a))",
            }
        )
    return variables


def _rewrite_operations(policies: PolicySet) -> str:
    operations = (
        'variables.removals.map(p, JSONPatch{op: "remove", path: p})'
        '\n+ variables.stringAdds.map(a, JSONPatch{op: "add", path: a[0], value: a[1]})'
        '\n+ variables.mapAdds.map(m, m.map(p, JSONPatch{op: "add", path: p, value: m[p]})[0])'
    )
    if tolerates(policies):
        listed = f"{SPEC} + '/tolerations'"
        operations += (
            "\n+ (size(variables.tolerations) == 0 && variables.tolerationsMissing.exists(m, m)"
            f'\n  ? [JSONPatch{{op: "add", path: {listed}, value: []}}] : [])'
            f"\n+ ({_tolerations(policies, _toleration)})"
            ".transformList(i, t, variables.tolerationsMissing[i],"
            f'\n  JSONPatch{{op: "add", path: {listed} + "/-", value: t}})'
        )
    return operations


def mutation(policies: PolicySet) -> str:
    """The JSONPatch expression: the rewrite, the keep-off affinity, or nothing."""
    rewrite = _rewrite_operations(policies)
    if not avoids(policies):
        return f"!variables.rewrites ? [] :\n{rewrite}"
    return f"variables.rewrites ? {rewrite}\n: !variables.keepsOff ? [] : {keep_off(policies)}"
