"""The lwgpu annotations a user sets: where they are read, and how `lwgpu.io/skip` is read.

Pods only ever carry their template's annotations: the Deployment controller copies
`spec.template` into each ReplicaSet, and the ReplicaSet controller builds pods from the
template's metadata alone (`pkg/controller/controller_utils.go`, `GetPodFromTemplate`). So
the GPU memory annotation and `lwgpu.io/container` are read from the pod template only; set
on a workload's own metadata they would reach no pod, and the user is warned instead of the
webhook guessing. `lwgpu.io/skip` there still leaves the workload itself alone, as it always
did, with a warning that its pods are still reviewed when they are created.

`lwgpu.io/skip` is read as Kubernetes reads its own boolean annotations: with Go's
`strconv.ParseBool` (`1 t T TRUE true True`, `0 f F FALSE false False`), and a value that is
neither is reported and treated as unset (`pkg/controller/endpoint/endpoints_controller.go`,
`syncService`, for `service.alpha.kubernetes.io/tolerate-unready-endpoints`). Anyone who may
create a pod may set it, so a policy with `allowSkip: false` does not honour it: the object
is decided, with a warning that says so.
"""

from __future__ import annotations

from webhook.api.names import BOOL_FALSE, BOOL_TRUE, CONTAINER_ANNOTATION, SKIP_ANNOTATION
from webhook.api.text import WARNING_LIMIT, shorten
from webhook.api.types import KubeObject
from webhook.policy import Policy


def _warning(text: str) -> str:
    return shorten(f"lwgpu: {text}", WARNING_LIMIT)


def skip(
    template: KubeObject, outer: KubeObject, kind: str, prefix: str, policy: Policy
) -> tuple[str | None, tuple[str, ...]]:
    """(why the object is skipped, or None; warnings) from `lwgpu.io/skip`.

    `template` and `outer` are the pod template's and the object's own annotations (the same
    map for a Pod); `prefix` is the field path to the pod template (`spec.template.`).
    """
    places = [(template, "")]
    if prefix:
        places.append((outer, f" on the {kind}'s metadata"))
    warnings = []
    for found, where in places:
        value = found.get(SKIP_ANNOTATION)
        if value in BOOL_TRUE and policy.allow_skip:
            if where:
                warnings.append(
                    _warning(
                        f"{SKIP_ANNOTATION} on the {kind} skips it but not its pods; set it in "
                        f"the pod template's annotations"
                    )
                )
            return f'annotation {SKIP_ANNOTATION}: "{value}"', tuple(warnings)
        if value in BOOL_TRUE:
            warnings.append(
                _warning(
                    f"ignored {SKIP_ANNOTATION}{where}: policy {policy.name!r} sets "
                    "allowSkip: false"
                )
            )
        elif value is not None and value not in BOOL_FALSE:
            warnings.append(_warning(f"ignored {SKIP_ANNOTATION}: {_not_bool(value, where)}"))
    return None, tuple(warnings)


def _not_bool(value: object, where: str) -> str:
    """What the skip value is, why it is not read, and what to write."""
    if isinstance(value, str):
        return f'{shorten(value, 20)!r}{where} (not true or false); write "true" to skip'
    # Unquoted YAML `true` is a boolean, which the apiserver refuses in annotations (strings).
    shown = str(value).lower() if isinstance(value, bool) else shorten(value, 20)
    return f'{shown}{where} (not a string); write "true", quoted, to skip'


def misplaced(
    outer: KubeObject, template: KubeObject, policy: Policy, kind: str, prefix: str
) -> tuple[str, ...]:
    """Warnings for annotations on a workload's own metadata that only a pod template can use.

    The same value in the pod template too (charts often copy annotations to both) loses
    nothing, so it is not worth a warning.
    """
    if not prefix:
        return ()
    keys = [
        k
        for k in (policy.annotation, CONTAINER_ANNOTATION)
        if k is not None and k in outer and template.get(k) != outer[k]
    ]
    return tuple(
        _warning(
            f"{key} on the {kind}'s metadata is ignored; set it in the pod template's annotations"
        )
        for key in keys
    )
