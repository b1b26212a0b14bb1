"""Typed shapes of the Kubernetes data lwgpu handles.

Objects arrive from users and are read defensively (a field may hold anything), so an
object is a JSON mapping, not a closed TypedDict; what lwgpu writes is typed exactly.
"""

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

KubeObject: TypeAlias = dict[str, Any]
"""A decoded JSON object (a Pod, a workload or a part of one), as the user wrote it."""


class PatchOperation(TypedDict):
    """One RFC 6902 operation of the JSONPatch the mutating webhook answers with."""

    op: Literal["add", "remove", "replace"]
    path: str
    value: NotRequired[Any]


class Toleration(TypedDict, total=False):
    """`core/v1` Toleration: what a class adds so its pods tolerate the nodes' taints."""

    key: str
    operator: Literal["Exists", "Equal"]
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    tolerationSeconds: int
