"""Messages for a GPU memory ask written in the wrong unit: too big for any class, or too
small to be meant.

A memory resource counts units (`nvidia.com/gpumem` MiB, `aliyun.com/gpu-mem` GiB), and
Kubernetes stores an extended resource as a plain integer: `nvidia.com/gpumem: 2Gi` is the
integer 2^31, which HAMi reads as that many MiB. Whoever wrote it meant 2 GiB, so the
message leads with what to write (`nvidia.com/gpumem counts MiB, so for 2Gi write
nvidia.com/gpumem: 2048`) and then says how the value was read. The decision itself is
unchanged: a size that does fit (`nvidia.com/gpumem: 1Ki`, 1024 MiB) is what the device
plugin would give the pod, and is rewritten as such. The apiserver spells a plain number
with a decimal suffix (`nvidia.com/gpumem: 16000` arrives as `16k`), so only a decimal
suffix on at least one unit's bytes reads as a size (`quantity.is_size`).

The other way round, `nvidia.com/gpumem: 4` is 4 MiB, where its writer meant 4 GiB: an ask
below `SMALL_MIB` in a resource counting less than a GiB gets a warning (and is still
rewritten: it fits the smallest class). A CUDA context alone takes a few hundred MiB of GPU
memory, so no program asks less and runs; the GiB that people ask of a GPU are 1 to 192.
"""

from __future__ import annotations

import math

from webhook.api import quantity
from webhook.api.names import GPU_RESOURCE
from webhook.api.text import WARNING_LIMIT, shorten
from webhook.policy import Policy

from .asks import Ask

SMALL_MIB = 256


def _unit(ask: Ask, policy: Policy) -> tuple[str, int | None]:
    """The memory resource the ask named, and the bytes in one of its units (None: annotation)."""
    resource = (ask.source or "").partition("=")[0]
    return resource, policy.memory_resources.get(resource)


def size_fix(ask: Ask, policy: Policy) -> str | None:
    """How to write the ask's value meant as a byte size, when its resource counts larger units."""
    resource, unit = _unit(ask, policy)
    if unit is None or unit == 1 or not quantity.is_size(ask.value, unit):
        return None
    written = shorten(ask.value)
    size = quantity.parse(ask.value)  # the ask's MiB were read from it: it parses
    if size % unit == 0:
        return f"for {written} write {resource}: {size // unit}"
    if policy.annotation is not None:
        return f"for {written} write the annotation {policy.annotation}: {written} instead"
    return f"for {written} write {resource}: {math.ceil(size / unit)} (rounded up)"


def _words(unit: int) -> str:
    """The unit of a memory resource in words: `GiB`, `MiB`, `units of 256Mi`."""
    return {1 << 30: "GiB", quantity.MIB: "MiB"}.get(unit) or f"units of {quantity.unit_text(unit)}"


def _counts(resource: str, unit: int) -> str:
    """`aliyun.com/gpu-mem counts GiB`."""
    return f"{resource} counts {_words(unit)}"


def _beyond(policy: Policy) -> str:
    largest = policy.profiles[-1]
    return (
        f"the largest lightweight GPU {largest.name} ({largest.memory_mib}Mi) of policy "
        f"{policy.name!r}"
    )


def left_unchanged(ask: Ask, memory: int, policy: Policy) -> str:
    """The warning for a pod left alone because nothing holds it (`whenNoProfileFits: ignore`)."""
    resource, unit = _unit(ask, policy)
    fix = size_fix(ask, policy)
    if fix and unit:
        # What to write leads: the rest of the 120 characters may be cut.
        warning = (
            f"lwgpu: {_counts(resource, unit)}, so {fix}; left unchanged: fits no lightweight GPU"
        )
    else:
        warning = f"lwgpu: {ask.source} ({memory}Mi) fits no lightweight GPU; left unchanged"
    return shorten(warning, WARNING_LIMIT)


def ignored(ask: Ask, memory: int, policy: Policy) -> str:
    """The reason a pod whose ask fits no class is left as it is (`whenNoProfileFits: ignore`)."""
    return (
        f"{ask.where} asks {ask.source} ({memory}Mi), more than {_beyond(policy)}; left "
        "unchanged (whenNoProfileFits: ignore)"
    )


def too_big(ask: Ask, memory: int, policy: Policy, prefix: str) -> str:
    """The denial of an ask larger than the policy's largest class."""
    largest = policy.profiles[-1]
    resource, unit = _unit(ask, policy)
    field = f"{prefix}spec.{ask.section}[{ask.position}].resources"
    fix = size_fix(ask, policy)
    # Only a policy for a mixed fleet says full GPU nodes exist (wholeGPUPods: allow is the
    # seed's cluster of lightweight nodes only): elsewhere a full GPU is no way out.
    full = (
        f", or ask {GPU_RESOURCE} for a full GPU node instead"
        if policy.whole_gpu_pods == "avoidLightweight"
        else ""
    )
    if fix and unit:
        # A size where a count belongs: what to write first, how it was read after.
        return (
            f"{field}: {_counts(resource, unit)}, so {fix}{full}; {ask.where} asks "
            f"{ask.source}, read as {memory}Mi, more than {_beyond(policy)}"
        )
    return (
        f"{field}: {ask.where} asks {ask.source} ({memory}Mi), more than {_beyond(policy)}; "
        f"ask for at most {_at_most(resource, unit, largest.memory_mib)}{full}"
    )


def too_little(ask: Ask, policy: Policy) -> str | None:
    """The warning for an ask too small to be meant (`SMALL_MIB`), in a resource counting
    less than a GiB; None for any other ask."""
    resource, unit = _unit(ask, policy)
    if unit is None or unit >= 1 << 30 or ask.memory_mib is None or ask.memory_mib >= SMALL_MIB:
        return None
    warning = f"lwgpu: {ask.where}: {ask.source} is {ask.memory_mib}Mi (it counts {_words(unit)})"
    count = quantity.parse(ask.value)  # the ask's MiB were read from it: it parses
    if (1 << 30) % unit == 0 and count == count.to_integral_value():
        warning += f"; for {count}Gi write {resource}: {int(count) * ((1 << 30) // unit)}"
    return shorten(warning, WARNING_LIMIT)


def _at_most(resource: str, unit: int | None, largest_mib: int) -> str:
    """The largest ask that fits, in the units the container used (gpushare counts GiB)."""
    if unit is None:
        return f"{largest_mib}Mi"
    return f"{resource}: {largest_mib * quantity.MIB // unit} (units of {quantity.unit_text(unit)})"
