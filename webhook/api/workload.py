"""Which objects carry a pod spec, and where.

Kinds are matched on (API group, kind): a `batch.volcano.sh` Job or a
`kubeflow.org` PyTorchJob is not a `batch` Job even though the kind reads alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# (group, kind) -> JSON path of the pod template ({metadata, spec}); () is the object itself.
TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): (),
    ("", "ReplicationController"): ("spec", "template"),
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}


def group_of(api_version: object) -> str | None:
    """The API group of an `apiVersion` (`apps/v1` -> `apps`, `v1` -> ``), None if malformed."""
    if not isinstance(api_version, str) or not api_version:
        return None
    group, _, version = api_version.rpartition("/")
    return group if version else None


def template_path(group: str | None, kind: object) -> tuple[str, ...] | None:
    """Where the pod template sits in an object of this group and kind; None if it has none."""
    if group is None or not isinstance(kind, str):
        return None
    return TEMPLATE_PATHS.get((group, kind))


def as_map(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one: user objects may hold anything."""
    return value if isinstance(value, dict) else {}


def dig(obj: Any, path: tuple[str, ...]) -> Any:
    """Follow `path` through nested mappings; None where anything is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def pointer(path: Sequence[str | int]) -> str:
    """An RFC 6901 JSON pointer for `path` (map keys and list indexes), escaping `~` and `/`."""
    return "".join(
        [
            ("/" + p.replace("~", "~0").replace("/", "~1") if "/" in p or "~" in p else "/" + p)
            if isinstance(p, str)
            else "/" + str(p)
            for p in path
        ]
    )


def field_path(path: tuple[str, ...]) -> str:
    """A kubectl-style field path for messages: spec.template.spec."""
    return ".".join(path)
