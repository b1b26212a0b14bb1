"""The governing policy's values as CEL variables: one expression per value, choosing among
the policies by `variables.governing`, so the checks are written once for every policy.

A value is a literal of one type (a string, a list of strings, a map of strings), as
homogeneous aggregate literals require (`webhook.compile.cel`). Discovered classes are
literals too: `with_classes` merges the node snapshot it is given, and refuses a policy that
discovers when none is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from webhook.api import quantity
from webhook.policy import Policy, PolicySet, Profile

from .cel import Named, Unexpressible, choose, int_map, maps, string, string_map, strings


def per_policy(values: Sequence[str]) -> str:
    """The value of the governing policy: `values[i]` is policy i's (`governing` is always one
    of them where any check runs: a match condition requires it)."""
    if all(v == values[0] for v in values):
        return values[0]
    cases = [(f"variables.governing == {i}", v) for i, v in enumerate(values[:-1])]
    return choose(cases, values[-1])


def with_classes(policies: PolicySet, discovered: Iterable[Profile] | None) -> PolicySet:
    """The policies with the classes the webhook would serve: `discovered` merged into each
    policy that discovers, as the webhook merges its node snapshot
    (`webhook.server.state.discovery`). Without a snapshot such a policy's classes are
    unknown, and compiling it is refused: a check without them would refuse every pod the
    webhook places on a discovered class."""
    if discovered is not None:
        return policies.with_discovered(discovered)
    for policy in policies.policies:
        if policy.discover_profiles:
            raise Unexpressible(
                f"policy {policy.name!r} ({policy.source}): discoverProfiles: true; its "
                "classes come from the Nodes' labels, and no snapshot of the Nodes was given "
                "to compile them from"
            )
    return policies


def units_held(policy: Policy, memory_mib: int) -> dict[str, str]:
    """For each memory resource, the most whole units `memory_mib` MiB hold.

    The webhook rounds an ask up to whole MiB (`quantity.to_mib`), so `value` units fit
    `memory` MiB exactly when value × unit <= memory × 1 MiB.
    """
    held = memory_mib * quantity.MIB
    return {resource: str(held // unit) for resource, unit in policy.memory_resources.items()}


# An ask × its unit below this many bytes is computed as an int (CEL's are 64 bits).
SAFE_BYTES = 1 << 62
# name -> the CEL literal of one policy's value
VALUES: dict[str, Callable[[Policy], str]] = {
    "policyName": lambda p: string(p.name),
    "memoryResources": lambda p: strings(sorted(p.memory_resources)),
    "memoryAnnotation": lambda p: string(p.annotation or ""),
    "maxGPUs": lambda p: str(p.max_gpus_per_pod),
    # class name -> its GPU memory, as a quantity
    "classMemory": lambda p: string_map({c.name: f"{c.memory_mib}Mi" for c in p.profiles}),
    # every label each class's nodes carry (selector and nodeLabels), and their keys
    "classLabels": lambda p: maps(dict(c.labels) for c in p.profiles),
    "classKeys": lambda p: strings(sorted({k for c in p.profiles for k in c.labels})),
    "leaveSchedulers": lambda p: strings(p.leave_alone.scheduler_names),
    "leaveNodeKeys": lambda p: strings(p.leave_alone.node_selector_keys),
    "leavePodLabels": lambda p: string_map(p.leave_alone.pod_labels),
    # the classes in fit order, by index: names, selectors, memory
    "classNames": lambda p: strings(c.name for c in p.profiles),
    "classSelectors": lambda p: maps(dict(c.node_selector) for c in p.profiles),
    # per class, the most units of each memory resource it holds
    "classUnits": lambda p: maps(units_held(p, c.memory_mib) for c in p.profiles),
    # bytes in one unit of each memory resource, and the values whose bytes fit an int
    "memoryUnits": lambda p: int_map(p.memory_resources),
    "safeUnits": lambda p: string_map(
        {r: str(SAFE_BYTES // u) for r, u in p.memory_resources.items()}
    ),
    "removedResources": lambda p: strings(
        dict.fromkeys((*p.memory_resources, *p.companion_resources))
    ),
    "avoidsLightweight": lambda p: "true" if p.whole_gpu_pods == "avoidLightweight" else "false",
    "exactPlacement": lambda p: "true" if p.placement == "exact" else "false",
    "allowSkip": lambda p: "true" if p.allow_skip else "false",
}
# Only where a policy leaves unfitting asks alone (`whenNoProfileFits: ignore`).
UNFITTING_VALUES: dict[str, Callable[[Policy], str]] = {
    "ignoreUnfitting": lambda p: "true" if p.when_no_profile_fits == "ignore" else "false",
}


def ignores_unfitting(policies: PolicySet) -> bool:
    """True when some policy leaves asks that fit no class unchanged."""
    return any(p.when_no_profile_fits == "ignore" for p in policies.policies)


def policy_variables(policies: PolicySet) -> list[Named]:
    """One variable per value the checks and the rewrite read."""
    values = dict(VALUES)
    if ignores_unfitting(policies):
        values.update(UNFITTING_VALUES)
    return [
        {"name": name, "expression": per_policy([value(p) for p in policies.policies])}
        for name, value in values.items()
    ]
