"""GPU resources a pod names that the policy does not read: typos, and what a rewrite leaves.

A container asking `aliyun.com/gpumem: 3` (for `aliyun.com/gpu-mem`) asks no GPU lwgpu
reads, and the install's match conditions send it to the webhook all the same (its name
holds "gpu"); the scheduler then waits for a node offering `aliyun.com/gpumem`, which none
does. A pod rewritten to `nvidia.com/gpu: 1` that still asks another GPU resource (a share
of another GPU-sharing system the policy does not list in `companionResources`) waits the
same way: a lightweight node offers `nvidia.com/gpu` alone. Either is said in a warning; the
decision is unchanged, so the final-state check and the compiled rewrite need no counterpart.

A GPU resource is an extended resource whose name holds "gpu" (as the match conditions
read it) or that NVIDIA's device plugin advertises (`nvidia.com/mig-1g.5gb`). A name is taken
for a typo of a resource the policy reads when difflib rates them at least `CLOSE` alike:
`aliyun.com/gpu-memory` and `nvidia.com/gpu-mem` are (0.92, 0.97), other vendors' resources
that are really meant are not (`amd.com/gpu` 0.72 against `nvidia.com/gpu`,
`nvidia.com/gpu.shared`, time-slicing's renamed resource, 0.8).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Iterator

from webhook.api.names import GPU_RESOURCE
from webhook.api.text import WARNING_LIMIT, shorten
from webhook.api.types import KubeObject
from webhook.policy import Policy

from .asks import SECTIONS, shorten_name

CLOSE = 0.85


def is_gpu_resource(name: str) -> bool:
    """An extended resource of a GPU: its name holds "gpu", or NVIDIA's plugin offers it."""
    return "/" in name and ("gpu" in name.lower() or name.startswith("nvidia.com/"))


def _found(spec: KubeObject, known: Collection[str]) -> Iterator[tuple[str, str]]:
    """(where, resource) for each GPU resource not in `known`, once per container.

    Every GPU pod is scanned, most of whose containers ask no GPU: nothing is built for them.
    """
    for section in SECTIONS:
        items = spec.get(section)
        for index, container in enumerate(items if isinstance(items, list) else ()):
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            names: dict[str, None] = {}
            for held in (resources.get("limits"), resources.get("requests")):
                if isinstance(held, dict):
                    for key in held:
                        # `cpu`, `memory`: most keys have no domain, and are passed first.
                        gpu = isinstance(key, str) and "/" in key and is_gpu_resource(key)
                        if gpu and key not in known:
                            names[key] = None
            if names:
                where = f"{section}[{index}] ({shorten_name(container.get('name'))})"
                yield from ((where, name) for name in names)


def _meant(name: str, policy: Policy) -> str | None:
    """The resource the policy reads that `name` is a typo of, if any."""
    close = difflib.get_close_matches(name, policy.gpu_resources, n=1, cutoff=CLOSE)
    return close[0] if close else None


def _typos(found: Iterable[tuple[str, str]], policy: Policy) -> tuple[str, ...]:
    warnings = []
    for where, name in found:
        meant = _meant(name, policy)
        if meant is not None:
            text = (
                f"lwgpu: {where} asks {shorten(name, 63)}, unknown to lwgpu; did you mean {meant}?"
            )
            warnings.append(shorten(text, WARNING_LIMIT))
    return tuple(warnings)


def typos(spec: KubeObject, policy: Policy) -> tuple[str, ...]:
    """A warning for each GPU resource the policy does not read that looks like one it does."""
    return _typos(_found(spec, policy.gpu_resources), policy)


def no_gpu(spec: KubeObject, policy: Policy) -> tuple[str, tuple[str, ...]]:
    """(why, warnings) for a pod asking neither `nvidia.com/gpu` nor GPU memory: it asks no
    GPU, or only GPU resources the policy does not read, said by name, typos warned about."""
    found = list(_found(spec, policy.gpu_resources))
    if not found:
        return "asks for no GPU", ()
    names = list(dict.fromkeys(name for _, name in found))
    shown = ", ".join(shorten(n, 63) for n in names[:3]) + (" ..." if len(names) > 3 else "")
    reason = f"asks no GPU resource that policy {policy.name!r} reads (it names {shown})"
    return reason, _typos(found, policy)


def left_over(spec: KubeObject, policy: Policy) -> tuple[str, ...]:
    """A warning for each GPU resource besides `nvidia.com/gpu` that a rewritten pod spec
    still asks: a lightweight node offers none, so the pod would stay Pending."""
    warnings = []
    for where, name in _found(spec, (GPU_RESOURCE,)):
        # A companion is removed only where memory was asked: one beside it stays.
        meant = None if name in policy.gpu_resources else _meant(name, policy)
        kept = f"lwgpu: {where} keeps {shorten(name, 63)}"
        # The fix first: a warning longer than 120 characters is cut.
        text = (
            f"{kept}: did you mean {meant}? No lightweight node offers it"
            if meant
            else f"{kept}, which no lightweight node offers; remove it"
        )
        warnings.append(shorten(text, WARNING_LIMIT))
    return tuple(warnings)
