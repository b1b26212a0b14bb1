"""What each container of a pod spec asks of the GPU: a device count and/or GPU memory.

Reading is defensive: the object comes from a user, so `resources: null`, lists
where maps belong and quantities of every spelling must lead to a decision or a
`Refusal` naming the field, never to an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Literal, NamedTuple

from webhook.api import quantity
from webhook.api.names import CONTAINER_ANNOTATION, GPU_RESOURCE
from webhook.api.text import shorten
from webhook.api.types import KubeObject
from webhook.fitting import effective
from webhook.policy import Policy

Section = Literal["initContainers", "containers"]
SECTIONS: tuple[Section, ...] = ("initContainers", "containers")


class Refusal(Exception):
    """The pod cannot run on a lightweight GPU; the message is for the kubectl user."""


class Ask(NamedTuple):
    """One container's GPU needs (an immutable named tuple)."""

    section: Section
    # Its index in the section; not `index`, which would hide the tuple method of that name.
    position: int
    name: str
    sidecar: bool  # an init container with restartPolicy: Always runs beside the app
    gpus: int  # GPUs this container occupies (a memory request counts as one)
    memory_mib: int | None  # GPU memory it asks, if any
    # What it asked, in the resource's own unit (`nvidia.com/gpumem=3000`, which reaches the
    # webhook as `3k`), or the annotation as written.
    source: str | None
    # The memory resource's value as received (None for the annotation): messages about an
    # ask too big for any class show what a size such as `nvidia.com/gpumem: 2Gi` meant.
    value: object = None

    @property
    def where(self) -> str:
        """`containers[0] (cuda)` for messages."""
        return f"{self.section}[{self.position}] ({shorten_name(self.name)})"


class _Memory(NamedTuple):
    """GPU memory a container asks, and where it asked it."""

    mib: int
    source: str  # see Ask.source
    value: object = None  # see Ask.value


def shorten_name(name: object) -> str:
    """A container name fit for a message."""
    return "(no name)" if name is None or name == "" else shorten(name, 63)


def _maps(container: KubeObject) -> tuple[KubeObject, KubeObject]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return {}, {}
    limits, requests = resources.get("limits"), resources.get("requests")
    return (
        limits if isinstance(limits, dict) else {},
        requests if isinstance(requests, dict) else {},
    )


def _value(limits: KubeObject, requests: KubeObject, resource: str, where: str) -> Any:
    """The container's value for `resource`: limits, else requests; both differing is refused."""
    if resource in limits and resource in requests:
        try:
            same = quantity.parse(limits[resource]) == quantity.parse(requests[resource])
        except quantity.QuantityError:
            same = limits[resource] == requests[resource]
        if not same:
            raise Refusal(
                f"{where}.resources: limits[{resource}]={quantity.amount(limits[resource])} and "
                f"requests[{resource}]={quantity.amount(requests[resource])} differ; "
                f"set the same value in both, or only in limits"
            )
    return limits[resource] if resource in limits else requests.get(resource)


def _names_gpu(limits: KubeObject, requests: KubeObject, policy: Policy) -> bool:
    if GPU_RESOURCE in limits or GPU_RESOURCE in requests:
        return True
    return any(resource in limits or resource in requests for resource in policy.memory_resources)


def mentions_gpu(container: KubeObject, policy: Policy) -> bool:
    """True when the container names nvidia.com/gpu or one of the policy's memory resources."""
    return _names_gpu(*_maps(container), policy)


def pod_mentions_gpu(spec: KubeObject, policy: Policy) -> bool:
    """True when any container or init container of the pod spec `mentions_gpu`."""
    for section in SECTIONS:
        items = spec.get(section)
        if isinstance(items, list):
            for container in items:
                if isinstance(container, dict) and mentions_gpu(container, policy):
                    return True
    return False


def containers(spec: KubeObject, section: Section) -> list[tuple[int, KubeObject]]:
    """(index, container) pairs of one section, skipping entries that are not objects."""
    items = spec.get(section)
    if not isinstance(items, list):
        return []
    return [(i, c) for i, c in enumerate(items) if isinstance(c, dict)]


def _annotation_target(
    spec: KubeObject, annotations: KubeObject, prefix: str
) -> tuple[Section, int]:
    wanted = annotations.get(CONTAINER_ANNOTATION)
    if wanted is None:
        app = containers(spec, "containers")
        if len(app) != 1:
            raise Refusal(
                f"{prefix}metadata.annotations: the GPU memory annotation applies to one "
                f"container, but the pod has {len(app)} ({_names(app)}); add annotation "
                f"{CONTAINER_ANNOTATION}: <container name>"
            )
        return "containers", app[0][0]
    for section in ("containers", "initContainers"):
        for index, container in containers(spec, section):
            if container.get("name") == wanted:
                return section, index
    init = containers(spec, "initContainers")
    there = _names(containers(spec, "containers")) + (f"; init: {_names(init)}" if init else "")
    raise Refusal(
        f"{prefix}metadata.annotations[{CONTAINER_ANNOTATION}]: no container is named "
        f"{shorten(wanted)!r}; name one of the pod's containers ({there})"
    )


def _names(items: list[tuple[int, KubeObject]], limit: int = 8) -> str:
    """`a, b, c` for a message: at most `limit` names, each shortened, then how many more."""
    names = ", ".join(shorten_name(c.get("name")) for _, c in items[:limit])
    more = len(items) - limit
    return (names or "none") + (f" and {more} more" if more > 0 else "")


def _annotation_memory(policy: Policy, annotations: KubeObject, prefix: str) -> _Memory | None:
    key = policy.annotation
    if key is None or key not in annotations:
        return None
    raw = annotations[key]
    where = f"{prefix}metadata.annotations[{key}]"
    try:
        if 0 < quantity.parse(raw) < quantity.MIB:
            raise quantity.QuantityError(f"{shorten(raw)!r} is less than 1Mi (no unit?)")
        return _Memory(quantity.to_mib(raw), f"{key}={shorten(raw)}")
    except quantity.QuantityError as err:
        fix = quantity.with_fix(err, "write a quantity such as 2Gi or 1536Mi")
        raise Refusal(f"{where}: {fix}") from None


def read_asks(spec: KubeObject, annotations: KubeObject, policy: Policy, prefix: str) -> list[Ask]:
    """Every container that uses the GPU, in init-then-app order; raise `Refusal` on bad asks.

    `prefix` is the field path to the pod template (`spec.template.`) for messages.
    """
    by_annotation = _annotation_memory(policy, annotations, prefix)
    target = _annotation_target(spec, annotations, prefix) if by_annotation else None
    asks = []
    for section in SECTIONS:
        for index, container in containers(spec, section):
            annotated = by_annotation if target == (section, index) else None
            ask = _read_ask(section, index, container, policy, prefix, annotated)
            if ask is not None:
                asks.append(ask)
    return asks


def _read_ask(
    section: Section,
    index: int,
    container: KubeObject,
    policy: Policy,
    prefix: str,
    annotated: _Memory | None,
) -> Ask | None:
    """One container's `Ask`, or None when it asks no GPU.

    `annotated` is the pod annotation's GPU memory when the annotation targets this container.
    """
    limits, requests = _maps(container)
    # Most containers of a big pod ask no GPU: skip them before building any text.
    if not _names_gpu(limits, requests, policy) and annotated is None:
        return None
    where = f"{prefix}spec.{section}[{index}]"
    memory = _resource_memory(limits, requests, policy, where)
    if annotated is not None:
        memory = _annotation_memory_wins(memory, annotated, where)
    gpus = _gpu_count(limits, requests, where)
    if memory is None and gpus == 0:
        return None
    sidecar = section == "initContainers" and container.get("restartPolicy") == "Always"
    mib, source, value = memory or (None, None, None)
    return Ask(
        section,
        index,
        str(container.get("name", "")),
        sidecar,
        max(gpus, 1 if memory is not None else 0),
        mib,
        source,
        value,
    )


def _resource_memory(
    limits: KubeObject, requests: KubeObject, policy: Policy, where: str
) -> _Memory | None:
    """The GPU memory the container's resources ask; naming two memory resources is refused."""
    memory: _Memory | None = None
    for resource, unit in policy.memory_resources.items():
        if resource not in limits and resource not in requests:
            continue
        value = _value(limits, requests, resource, where)
        if value is None:
            continue
        if memory is not None:
            raise Refusal(
                f"{where}.resources: asks GPU memory twice ({memory.source} and "
                f"{resource}); keep one"
            )
        memory = _Memory(
            _resource_mib(value, unit, resource, where),
            f"{resource}={quantity.amount(value)}",
            value,
        )
    return memory


def _resource_mib(value: object, unit: int, resource: str, where: str) -> int:
    try:
        return quantity.to_mib(value, unit)
    except quantity.QuantityError as err:
        fix = f"write the GPU memory as a whole number, e.g. {resource}: 2"
        raise Refusal(
            f"{where}.resources.limits[{resource}]: {quantity.with_fix(err, fix)}"
        ) from None


def _annotation_memory_wins(memory: _Memory | None, annotated: _Memory, where: str) -> _Memory:
    """The annotation's memory for the container it targets; a different resource ask is refused."""
    if memory is not None and memory.mib != annotated.mib:
        raise Refusal(
            f"{where}.resources: asks {memory.source} but the pod annotation asks "
            f"{annotated.source}; keep one"
        )
    return annotated


def _gpu_count(limits: KubeObject, requests: KubeObject, where: str) -> int:
    raw_gpus = _value(limits, requests, GPU_RESOURCE, where)
    try:
        return 0 if raw_gpus is None else quantity.count(raw_gpus)
    except quantity.QuantityError as err:
        fix = f"ask for {GPU_RESOURCE}: 1 (or GPU memory) instead"
        raise Refusal(
            f"{where}.resources.limits[{GPU_RESOURCE}]: {quantity.with_fix(err, fix)}"
        ) from None


def effective_gpus(asks: Sequence[Ask]) -> int:
    """GPUs the pod needs, by Kubernetes' effective-request rule for init and sidecar
    containers (webhook.fitting `effective`, the one copy of the rule)."""
    return int(effective((a.section == "initContainers", a.sidecar, Decimal(a.gpus)) for a in asks))
