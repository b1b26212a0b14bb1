"""Which objects the webhook leaves as they are over their life in a real cluster.

Each rule follows what a Kubernetes component does with the object afterwards:

- **Mirror pods** (annotation `kubernetes.io/config.mirror`) are the API's copy of a
  kubelet's static pod: the kubelet runs the pod from its manifest whatever the API says,
  and the mirror may not be changed (`pkg/apis/core/validation`,
  `ValidatePodSpecificAnnotationUpdates`), so refusing or rewriting one only makes the
  kubelet retry forever.
- **Objects a reviewed workload controls**: a ReplicaSet owned by a Deployment, a Job
  owned by a CronJob. The deployment controller finds "its" ReplicaSet by comparing pod
  templates (`pkg/controller/deployment/util/deployment_util.go`, `FindNewReplicaSet` /
  `EqualIgnoreHash`), so a rewritten ReplicaSet no longer matches, and the controller
  creates another and loops on the name collision. The owner's template is reviewed on
  its own CREATE and UPDATE, and every pod is reviewed at its CREATE.
- **Job UPDATEs**: a Job's pod template is immutable (`pkg/apis/batch/validation`,
  `ValidateJobSpecUpdate` -> `validatePodTemplateUpdate`; only scheduling directives of a
  suspended Job that never started may change, never resources), so a patch could only
  make the apiserver refuse a label change, a finalizer removal or an un-suspend.
- **UPDATEs that leave the pod template as it was** (scaling, labels, finalizers, status
  bookkeeping by controllers): the template was reviewed when it was written, or predates
  the webhook; only a change the user makes to it is reviewed.
"""

from __future__ import annotations

from typing import Any

from webhook.api.names import MIRROR_ANNOTATION
from webhook.api.workload import TEMPLATE_PATHS, as_map, dig, group_of


def controller_of(obj: Any) -> tuple[str, str, str] | None:
    """(group, kind, name) of the object's controller ownerReference, if it has one."""
    references = (
        as_map(obj.get("metadata")).get("ownerReferences") if isinstance(obj, dict) else None
    )
    for reference in references if isinstance(references, list) else []:
        if isinstance(reference, dict) and reference.get("controller") is True:
            group = group_of(reference.get("apiVersion"))
            kind, name = reference.get("kind"), reference.get("name")
            if group is not None and isinstance(kind, str):
                return group, kind, name if isinstance(name, str) else ""
    return None


def left_alone(
    obj: dict[str, Any],
    old: Any,
    group: str | None,
    kind: str,
    path: tuple[str, ...],
    operation: str,
) -> str | None:
    """Why the webhook leaves `obj` unchanged and unrefused, or None when it decides it.

    `old` is the AdmissionReview's `oldObject` (None on CREATE); `path` is where the pod
    template sits (`()` for a Pod).
    """
    if path == ():
        if MIRROR_ANNOTATION in as_map(as_map(obj.get("metadata")).get("annotations")):
            return "a mirror pod: the kubelet runs its static pod as written"
        if operation == "UPDATE":
            return "a Pod's spec cannot change after creation"
        return None
    owner = controller_of(obj)
    if owner is not None and owner[:2] in TEMPLATE_PATHS and owner[:2] != ("", "Pod"):
        return (
            f"its pod template belongs to its controller {owner[1]} {owner[2]}, which the "
            "webhook reviews; its pods are reviewed when they are created"
        )
    if operation != "UPDATE":
        return None
    if (group, kind) == ("batch", "Job"):
        return "a Job's pod template cannot change after creation"
    if isinstance(old, dict) and dig(old, path) == dig(obj, path):
        return "the pod template did not change"
    return None
