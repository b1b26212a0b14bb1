"""The keep-off affinity in the apiserver: `webhook.core.rewrite.keep_off` in CEL, for a
policy with `wholeGPUPods: avoidLightweight`.

A pod that asks whole GPUs and pins no class gets one `NotIn` requirement per label key the
classes select on, in every required node selector term (terms are ORed), or a term of its
own where it has none; a requirement already in a term is not added again, so a rewritten pod
is left as it is. The requirements and the affinity levels a pod may lack are object literals
of the mutation (`cel.instance`): their fields are not all strings.
"""

from __future__ import annotations

from webhook.policy import Policy, PolicySet

from .cel import choose, dig, instance, pointer_literal, present, string, strings

SPEC = "variables.specPointer"
REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
TERMS = (*REQUIRED, "nodeSelectorTerms")
AVOIDS = "avoidLightweight"


def avoids(policies: PolicySet) -> bool:
    """Some policy keeps whole-GPU pods off its classes."""
    return any(p.whole_gpu_pods == AVOIDS for p in policies.policies)


def _exclusions(policy: Policy) -> dict[str, list[str]]:
    """Per label key the classes select on, their values (`sharing.exclusions`)."""
    keys = sorted({key for p in policy.profiles for key in p.node_selector})
    return {
        key: sorted({p.node_selector[key] for p in policy.profiles if key in p.node_selector})
        for key in keys
    }


def _operations(policy: Policy) -> str:
    """`rewrite.keep_off` for one policy's exclusions."""
    excluded = _exclusions(policy)
    requirements = (
        "["
        + ", ".join(
            instance(
                ("spec", *TERMS, "matchExpressions"),
                {"key": string(k), "operator": '"NotIn"', "values": strings(v)},
            )
            for k, v in excluded.items()
        )
        + "]"
    )
    term = instance(("spec", *TERMS), {"matchExpressions": requirements})
    # what to add where the pod's affinity first misses a level: each level holds the next
    levels = [f"[{term}]"]
    for depth in range(len(REQUIRED), 0, -1):
        levels.insert(0, instance(("spec", *REQUIRED[:depth]), {TERMS[depth]: levels[0]}))
    created = choose(
        [
            (
                f"!({present('variables.spec', REQUIRED[:depth])})",
                f'JSONPatch{{op: "add", path: {SPEC} + {pointer_literal(REQUIRED[:depth])},'
                f" value: {levels[depth - 1]}}}",
            )
            for depth in range(1, len(REQUIRED) + 1)
        ],
        f'JSONPatch{{op: "add", path: {SPEC} + {pointer_literal(TERMS)}, value: {levels[-1]}}}',
    )
    at = f"{SPEC} + {pointer_literal(TERMS)} + '/' + string(i) + '/matchExpressions'"
    expressions = dig("term", ("matchExpressions",), "[]")
    keys, values = strings(excluded), "[" + ", ".join(map(strings, excluded.values())) + "]"
    held = (
        f"{expressions}.exists(e, has(e.key) && e.key == {keys}[j] && has(e.operator)"
        f" && e.operator == 'NotIn'\n    && has(e.values) && e.values == {values}[j])"
    )
    return (
        f"size(variables.terms) == 0 ? [{created}]\n: variables.terms.transformList(i, term,"
        f" !({present('term', ('matchExpressions',))})"
        f'\n  ? [JSONPatch{{op: "add", path: {at}, value: {requirements}}}]'
        f"\n  : {requirements}.transformList(j, x, !({held}),"
        f'\n    JSONPatch{{op: "add", path: {at} + "/-", value: x}})).flatten()'
    )


def keep_off(policies: PolicySet) -> str:
    """The operations for the governing policy, one of those that avoid."""
    avoiding = [(i, p) for i, p in enumerate(policies.policies) if p.whole_gpu_pods == AVOIDS]
    return choose(
        [(f"variables.governing == {i}", _operations(p)) for i, p in avoiding[:-1]],
        _operations(avoiding[-1][1]),
    )
