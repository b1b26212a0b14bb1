"""Messages for a GPU memory ask that no lightweight class holds: what to ask instead.

A memory resource counts units (`nvidia.com/gpumem` MiB, `aliyun.com/gpu-mem` GiB), and
Kubernetes stores an extended resource as a plain integer: `nvidia.com/gpumem: 2Gi` is the
integer 2^31, which HAMi reads as that many MiB. Whoever wrote it meant 2 GiB, so the
message says how the value was read and what to write (`nvidia.com/gpumem: 2048`). The
decision itself is unchanged: a size that does fit (`nvidia.com/gpumem: 1Ki`, 1024 MiB) is
what the device plugin would give the pod, and is rewritten as such. The apiserver spells a
plain number with a decimal suffix (`nvidia.com/gpumem: 16000` arrives as `16k`), so only a
decimal suffix on at least one unit's bytes reads as a size (`quantity.is_size`).
"""

from __future__ import annotations

import math

from webhook.api import quantity
from webhook.api.names import GPU_RESOURCE
from webhook.api.text import WARNING_LIMIT, shorten
from webhook.policy import Policy

from .asks import Ask


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


def left_unchanged(ask: Ask, memory: int, policy: Policy) -> str:
    """The warning for a pod left alone because nothing holds it (`whenNoProfileFits: ignore`)."""
    fix = size_fix(ask, policy)
    head = f"lwgpu: {ask.source} ({memory}Mi) fits no lightweight GPU"
    # The fix is worth more than the words it replaces, within the 120 characters of a warning.
    warning = f"{head}, unchanged; {fix}" if fix else f"{head}; left unchanged"
    return shorten(warning, WARNING_LIMIT)


def too_big(ask: Ask, memory: int, policy: Policy, prefix: str) -> str:
    """The denial of an ask larger than the policy's largest class."""
    largest = policy.profiles[-1]
    resource, unit = _unit(ask, policy)
    fix = size_fix(ask, policy)
    # Said only where the value was written as a size, which those units make too big.
    counted = f": {resource} counts units of {quantity.unit_text(unit)}" if fix and unit else ""
    if fix is None:
        fix = f"ask for at most {_at_most(resource, unit, largest.memory_mib)}"
    # Only a policy for a mixed fleet says full GPU nodes exist (wholeGPUPods: allow is the
    # seed's cluster of lightweight nodes only): elsewhere a full GPU is no way out.
    if policy.whole_gpu_pods == "avoidLightweight":
        fix += f", or ask {GPU_RESOURCE} for a full GPU node instead"
    return (
        f"{prefix}spec.{ask.section}[{ask.position}].resources: {ask.where} asks "
        f"{ask.source} ({memory}Mi{counted}), more than the largest lightweight GPU "
        f"{largest.name} ({largest.memory_mib}Mi) of policy {policy.name!r}; {fix}"
    )


def _at_most(resource: str, unit: int | None, largest_mib: int) -> str:
    """The largest ask that fits, in the units the container used (gpushare counts GiB)."""
    if unit is None:
        return f"{largest_mib}Mi"
    return f"{resource}: {largest_mib * quantity.MIB // unit} (units of {quantity.unit_text(unit)})"
