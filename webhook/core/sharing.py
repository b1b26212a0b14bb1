"""Sharing a cluster: pods another GPU-sharing system owns, and keeping whole GPUs off ours.

A pod another system schedules (ACK cGPU selects `ack.node.gpu.schedule`, HAMi sets its
`schedulerName`, gpushare pods carry their own labels) asks the same resources lwgpu reads,
but is not lwgpu's to rewrite or refuse: the policy's `leaveAlone` names them. A node
selector key marks such a pod only when every node it may be placed on carries the key
(`webhook.scheduling.required_keys`): a pod that names the key to stay *off* those nodes
(`DoesNotExist`, `NotIn`), or in one of several ORed terms, lands elsewhere, and leaving it
alone would let any pod author step around the policy.

With `wholeGPUPods: avoidLightweight`, a pod that asks whole GPUs and pins no lightweight
class gets a required node affinity excluding every class. Node selector terms are ORed
(`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`, `NodeSelector.Match`), so the
expressions go into *every* term, or the pod could still land on a class through one.
"""

from __future__ import annotations

from typing import Any

from webhook.api.types import KubeObject
from webhook.policy import Policy
from webhook.scheduling import required_keys


def other_system(spec: KubeObject, labels: KubeObject, policy: Policy) -> str | None:
    """Why another GPU-sharing system owns the pod, or None when it is lwgpu's to decide."""
    leave = policy.leave_alone
    scheduler = spec.get("schedulerName")
    if isinstance(scheduler, str) and scheduler in leave.scheduler_names:
        return f"schedulerName {scheduler} is another GPU-sharing system's (spec.leaveAlone)"
    if leave.pod_labels and all(labels.get(k) == v for k, v in leave.pod_labels.items()):
        return "its labels mark another GPU-sharing system's pod (spec.leaveAlone)"
    keys = required_keys(spec) if leave.node_selector_keys else set()
    for key in leave.node_selector_keys:
        if key in keys:
            return f"it selects {key}, another GPU-sharing system's nodes (spec.leaveAlone)"
    return None


def exclusions(policy: Policy) -> list[dict[str, Any]]:
    """One `NotIn` node selector requirement per label key the classes select on."""
    values: dict[str, set[str]] = {}
    for profile in policy.profiles:
        for key, value in profile.node_selector.items():
            values.setdefault(key, set()).add(value)
    return [
        {"key": key, "operator": "NotIn", "values": sorted(found)}
        for key, found in sorted(values.items())
    ]
