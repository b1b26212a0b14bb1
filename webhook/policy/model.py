"""The policy model: frozen dataclasses, and which policy governs a namespace.

Loading and validating YAML lives in `load`; this module only holds the
validated result, so the decision can take it as plain, immutable data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from functools import cached_property
from types import MappingProxyType
from typing import Literal, TypeVar

from webhook.api.names import GPU_RESOURCE, MEMORY_ANNOTATION

K = TypeVar("K")
V = TypeVar("V")
NoFitAction = Literal["deny", "ignore"]
WholeGPUAction = Literal["allow", "avoidLightweight"]
Placement = Literal["exact", "spillOver"]
# enforce: rewrite and refuse; audit: decide the same, change and refuse nothing, and say
# what enforce would have done (a gradual rollout).
Mode = Literal["enforce", "audit"]

# A policy's defaults, here once: the loader fills an absent field from these.
# Resources that ask GPU memory, and the unit of one: gpushare counts GiB, HAMi MiB.
DEFAULT_MEMORY_UNITS: Mapping[str, str] = MappingProxyType(
    {"aliyun.com/gpu-mem": "Gi", "nvidia.com/gpumem": "Mi"}
)
# Resources that only mean something beside a shared-GPU memory request and are removed with
# it: no lightweight node offers them, so a pod keeping one never runs. HAMi's core share and
# memory share (`nvidia.com/gpucores`, `nvidia.com/gpumem-percentage`), ACK cGPU's core share
# (`aliyun.com/gpu-core.percentage`).
DEFAULT_COMPANIONS = (
    "nvidia.com/gpucores",
    "nvidia.com/gpumem-percentage",
    "aliyun.com/gpu-core.percentage",
)

API_VERSION = "lwgpu.io/v1alpha1"
KIND = "LightweightGPUPolicy"


def frozen_map(data: Mapping[K, V] | None = None) -> Mapping[K, V]:
    """A read-only copy of `data`, so frozen dataclasses stay frozen all the way down."""
    return MappingProxyType(dict(data or {}))


@dataclass(frozen=True)
class Profile:
    """One lightweight GPU class: the memory its single GPU has and how to select it.

    `node_selector` is what the webhook writes into pods; `node_labels` are further labels
    every node of the class carries, by which a pod may already pin the class.
    """

    name: str
    memory_mib: int
    node_selector: Mapping[str, str] = field(default_factory=frozen_map)
    tolerations: tuple[Mapping[str, object], ...] = ()
    node_labels: Mapping[str, str] = field(default_factory=frozen_map)

    @cached_property
    def labels(self) -> Mapping[str, str]:
        """Every label the policy knows the class's nodes carry: node labels and selector."""
        return frozen_map({**self.node_labels, **self.node_selector})

    # Rendered once per profile: the warning of every mutated pod names the selector.
    @cached_property
    def selector_text(self) -> str:
        """`key=value,...` for messages and warnings."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.node_selector.items()))


@dataclass(frozen=True)
class LeaveAlone:
    """Pods another GPU-sharing system schedules (ACK cGPU, HAMi, gpushare): never touched.

    A pod is theirs when every node it may be placed on carries one of `node_selector_keys`
    (its nodeSelector names the key, or each required node selector term requires it:
    `webhook.scheduling.required_keys`), its `schedulerName` is one of `scheduler_names`, or
    it carries every label of `pod_labels`.
    """

    node_selector_keys: tuple[str, ...] = ()
    scheduler_names: tuple[str, ...] = ()
    pod_labels: Mapping[str, str] = field(default_factory=frozen_map)


@dataclass(frozen=True)
class Policy:
    """A validated `LightweightGPUPolicy` document."""

    name: str
    source: str
    profiles: tuple[Profile, ...]  # ascending memory
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    memory_resources: Mapping[str, int] = field(default_factory=frozen_map)  # name -> bytes/unit
    annotation: str | None = MEMORY_ANNOTATION
    companion_resources: tuple[str, ...] = DEFAULT_COMPANIONS
    max_gpus_per_pod: int = 1
    when_no_profile_fits: NoFitAction = "deny"
    discover_profiles: bool = False
    # allow: whole-GPU pods go wherever they fit (a cluster of lightweight nodes only, as the
    # seed's); avoidLightweight: they get a required affinity that keeps them off the classes.
    whole_gpu_pods: WholeGPUAction = "allow"
    # exact: the chosen class's nodeSelector (the seed's form); spillOver: a required affinity
    # on every class that fits, preferring the smallest (`webhook.core.spill`).
    placement: Placement = "exact"
    leave_alone: LeaveAlone = field(default_factory=LeaveAlone)
    # false: `lwgpu.io/skip` exempts no pod or workload, where pod authors must not opt out.
    allow_skip: bool = True
    mode: Mode = "enforce"
    # What loaded but is likely not meant (`policy check` prints them), file, document, field.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    # Read for every GPU pod: the webhook's warnings name the GPU resources besides these.
    @cached_property
    def gpu_resources(self) -> tuple[str, ...]:
        """`nvidia.com/gpu` and the resources the policy reads (memory) or removes (companions)."""
        return (GPU_RESOURCE, *self.memory_resources, *self.companion_resources)

    def with_discovered(self, discovered: Iterable[Profile]) -> Policy:
        """This policy plus the discovered classes its static profiles do not already select.

        Static profiles come first, so at equal memory the admin's own class wins the best fit.
        """
        selectors = {tuple(sorted(p.node_selector.items())) for p in self.profiles}
        extra = [p for p in discovered if tuple(sorted(p.node_selector.items())) not in selectors]
        if not extra:
            return self
        # sorted() is stable: static profiles stay ahead of discovered ones of equal memory
        merged = sorted((*self.profiles, *extra), key=lambda p: p.memory_mib)
        return replace(self, profiles=tuple(merged))

    def include_rank(self, namespace: str) -> tuple[int, int] | None:
        """How specifically this policy claims `namespace`, or None when it does not."""
        claim = self.claim(namespace)
        return pattern_rank(claim[1]) if claim is not None and claim[0] == "include" else None

    def claim(self, namespace: str) -> tuple[Literal["include", "exclude"], str] | None:
        """The pattern that decides `namespace` for this policy: the first exclude that
        matches it, else the most specific include that does, else None."""
        for pattern in self.exclude:
            if fnmatchcase(namespace, pattern):
                return "exclude", pattern
        matching = [p for p in self.include if fnmatchcase(namespace, p)]
        return ("include", max(matching, key=pattern_rank)) if matching else None


def is_glob(pattern: str) -> bool:
    """True for a namespace pattern with wildcards."""
    return "*" in pattern or "?" in pattern


def pattern_rank(pattern: str) -> tuple[int, int]:
    """Exact names beat globs; among globs, more literal characters beat fewer (`*` is last)."""
    if not is_glob(pattern):
        return (1, len(pattern))
    return (0, sum(1 for c in pattern if c not in "*?"))


def globs_overlap(first: str, second: str) -> bool:
    """True when some namespace name matches both patterns (`*`, `?` and literals only)."""
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        a = first[i] if i < len(first) else None
        b = second[j] if j < len(second) else None
        if a is None and b is None:
            return True
        if a == "*":
            todo.append((i + 1, j))
        if b == "*":
            todo.append((i, j + 1))
        if a is None or b is None:
            continue
        # Both consume one character; possible unless two different literals meet.
        if a in "*?" or b in "*?" or a == b:
            todo.append((i if a == "*" else i + 1, j if b == "*" else j + 1))
    return False


NAMESPACES_REMEMBERED = 4096  # a cluster with more namespaces simply matches again


@dataclass(frozen=True)
class PolicySet:
    """Every loaded policy; answers which one (at most one) governs a namespace.

    Matching every policy's namespace globs costs more per review than reading the whole
    AdmissionReview, and a set never changes, so each answer is remembered in the set
    itself: a reload hands over a new set with an empty memo. Reviews on several threads
    may fill it at once; each write stores the same answer, so none is ever wrong.
    """

    policies: tuple[Policy, ...]
    _governing: dict[str, Policy | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def for_namespace(self, namespace: str) -> Policy | None:
        """The governing policy: the most specific include that the namespace matches."""
        try:
            return self._governing[namespace]
        except KeyError:
            pass
        governing = self._match(namespace)
        if len(self._governing) >= NAMESPACES_REMEMBERED:
            self._governing.clear()
        self._governing[namespace] = governing
        return governing

    def _match(self, namespace: str) -> Policy | None:
        best: tuple[tuple[int, int], Policy] | None = None
        for policy in self.policies:
            rank = policy.include_rank(namespace)
            if rank is not None and (best is None or rank > best[0]):
                best = (rank, policy)
        return best[1] if best else None

    def discovers(self) -> bool:
        """True when any policy asks for classes discovered from Node labels."""
        return any(p.discover_profiles for p in self.policies)

    def with_discovered(self, discovered: Iterable[Profile]) -> PolicySet:
        """This set with `discovered` classes added to every policy that asks for them."""
        found = tuple(discovered)
        if not found or not self.discovers():
            return self
        return PolicySet(
            tuple(p.with_discovered(found) if p.discover_profiles else p for p in self.policies)
        )
