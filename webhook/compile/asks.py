"""What each container asks, read in CEL as `webhook.core.asks` reads it, for the rewrite in
the apiserver: which containers ask GPU memory, whether the webhook would refuse to read the
pod at all, which classes hold every ask, and the audit trail the rewrite records.

The MutatingAdmissionPolicy rewrites only a pod the webhook would rewrite; where the webhook
would refuse (two memory resources in one container, limits and requests that differ, a
memory ask of zero, an annotation that is no size or names no container), it changes
nothing, and the final-state check refuses the pod, which still asks memory.

A memory resource's value is read when it is a whole number of its units, as the apiserver
stores every extended resource it admits: a fraction (`nvidia.com/gpumem: 1.5`, which only a
rewrite can make valid) is left unrewritten, so refused, where the webhook rounds it up.
"""

from __future__ import annotations

from webhook.api import quantity
from webhook.api.text import AUDIT_LIMIT

from .cel import Named, dig, string
from .checks import amount, short, value_of

MIB = quantity.MIB
# `rewrite._audit_trail` keeps entries within AUDIT_LIMIT less the room of its tail.
TRAIL_KEPT = AUDIT_LIMIT - 24


def _same(limits: str, requests: str, resource: str) -> str:
    """Limits and requests of `resource` name one quantity when both do (`asks._value`)."""
    both = f"{resource} in {limits} && {resource} in {requests}"
    return (
        f"(!({both}) || quantity(string({limits}[{resource}]))"
        f".compareTo(quantity(string({requests}[{resource}]))) == 0)"
    )


def _resource_mib(index: str) -> str:
    """Container `index`'s memory ask in MiB, rounded up (`quantity.to_mib`); -1 when the
    product would not fit an int (more than 4 EiB: it fits no class either way)."""
    value = f"quantity(variables.valueOf[{index}])"
    resource = f"variables.resourceOf[{index}]"
    return (
        f"({value}.isLessThan(quantity(variables.safeUnits[{resource}]))"
        f" ? ({value}.asInteger() * variables.memoryUnits[{resource}] - 1) / {MIB} + 1 : -1)"
    )


def _whole(value: str, *, positive: bool) -> str:
    """The quantity text `value` is a whole number, above zero or at least zero."""
    return (
        f"quantity({value}).isInteger()"
        f" && quantity({value}).compareTo(quantity('0')) {'>' if positive else '>='} 0"
    )


def _well_formed() -> str:
    """Per container: the webhook reads it without refusing (`asks._read_ask`)."""
    limits, requests = "variables.limits[i]", "variables.requests[i]"
    keys = "variables.memoryKeys[i]"
    gpu = string("nvidia.com/gpu")
    memory = (
        f"size({keys}) == 0 || (size({keys}) == 1 && {_same(limits, requests, f'{keys}[0]')}"
        f"\n    && {_whole('variables.valueOf[i]', positive=True)})"
    )
    count = "string(" + value_of("i", gpu) + ")"
    gpus = (
        f"!({gpu} in {limits} || {gpu} in {requests}) || ({_same(limits, requests, gpu)}"
        f"\n    && {_whole(count, positive=False)})"
    )
    annotated = (
        f"i != variables.target || size({keys}) == 0"
        f" || {_resource_mib('i')} == variables.annotationMiB"
    )
    return (
        f"variables.containers.transformList(i, c,\n  ({memory})\n  && ({gpus})"
        f"\n  && ({annotated}))"
    )


def _trail_entries() -> str:
    """`rewrite._audit_trail`'s entries: what each asking container asked, named when several
    did."""
    name = dig("variables.containers[i]", ("name",), "''")
    annotation = f"variables.memoryAnnotation + '=' + {short('variables.annotationAsk')}"
    resource = "variables.resourceOf[i] + '=' + " + short(amount("variables.valueOf[i]"))
    several = "size(variables.memoryAsked.filter(a, a)) > 1"
    return (
        f"variables.memoryAsked.transformList(i, asked, asked,\n  ({several} ? {name} + ':' : '')"
        f"\n  + (i == variables.target ? {annotation}\n    : {resource}))"
    )


def ask_variables() -> list[Named]:
    """The MutatingAdmissionPolicy's reading of the asks, after the final-state check's
    (`checks.check_variables`, whose per-container lists it indexes alike)."""
    ask = "variables.annotationAsk"
    entries = "variables.trailEntries"
    prefix = f"{entries}.transformList(j, f, j <= i, size(f) + 1).sum()"
    return [
        {
            # the annotation's size in MiB, rounded up; -2 for a fraction of a byte
            "name": "annotationMiB",
            "expression": f"variables.annotationValid && variables.annotated"
            f" && quantity({ask}).isInteger()\n  ? (quantity({ask}).asInteger() - 1) / {MIB} + 1"
            " : -2",
        },
        {
            # per container, the memory resource it names, when it names exactly one
            "name": "resourceOf",
            "expression": "variables.memoryKeys.map(k, size(k) == 1 ? k[0] : '')",
        },
        {
            # and that resource's value, as a quantity's text
            "name": "valueOf",
            "expression": "variables.memoryKeys.transformList(i, k, size(k) == 1"
            f" ? string({value_of('i', 'k[0]')}) : '')",
        },
        {"name": "wellFormed", "expression": _well_formed()},
        {
            # per class of the governing policy, whether it holds every ask
            "name": "fits",
            "expression": "variables.classUnits.transformList(c, units,"
            "\n  variables.valueOf.all(i, v, v == ''"
            " || quantity(v).compareTo(quantity(units[variables.resourceOf[i]])) <= 0)"
            f"\n  && (variables.target < 0 || quantity({ask})"
            ".compareTo(quantity(variables.classMemory[variables.classNames[c]])) <= 0))",
        },
        {"name": "trailEntries", "expression": _trail_entries()},
        {
            # the entries that fit when the whole trail does not
            "name": "trailKept",
            "expression": f"{entries}.transformList(i, e, {prefix} <= {TRAIL_KEPT}, e)",
        },
        {
            # `lwgpu.io/rewritten-from`, at most AUDIT_LIMIT characters
            "name": "auditTrail",
            "expression": f"size({entries}.join(',')) <= {AUDIT_LIMIT} ? {entries}.join(',')"
            f"\n: variables.trailKept.join(',') + ',... and '"
            f" + string(size({entries}) - size(variables.trailKept)) + ' more'",
        },
    ]
