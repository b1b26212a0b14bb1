"""`spec.leaveAlone`, `spec.wholeGPUPods` and `spec.placement`: how a policy shares a cluster
with other GPUs.

Beside lightweight nodes a cluster may hold full GPU nodes and nodes another GPU-sharing
system schedules (ACK cGPU, gpushare, HAMi), which use the same resource names. A policy
names the pods it must never touch, and says whether whole-GPU pods are kept off the
lightweight classes, and whether a pod may spill over to larger lightweight classes.
"""

from __future__ import annotations

from typing import Any, cast, get_args

from webhook.api.text import as_yaml
from webhook.api.validation import is_label_value, is_qualified_name

from .document import PolicyDocument
from .model import LeaveAlone, Placement, WholeGPUAction, frozen_map

_FIELDS = {"nodeSelectorKeys", "schedulerNames", "podLabels"}


def _names(doc: PolicyDocument, value: Any, path: str, valid: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and valid(v) for v in value):
        doc.error(path, f"must be a list of {what}")
        return ()
    return tuple(value)


def load_leave_alone(doc: PolicyDocument, raw: Any) -> LeaveAlone:
    """The pods of other GPU-sharing systems, from `spec.leaveAlone`; errors go to `doc`."""
    raw = doc.mapping(raw, "spec.leaveAlone", _FIELDS)
    labels = raw.get("podLabels") or {}
    if not isinstance(labels, dict) or not all(
        is_qualified_name(k) and is_label_value(v) for k, v in labels.items()
    ):
        doc.error("spec.leaveAlone.podLabels", "must map label keys to label values")
        labels = {}
    return LeaveAlone(
        node_selector_keys=_names(
            doc,
            raw.get("nodeSelectorKeys"),
            "spec.leaveAlone.nodeSelectorKeys",
            is_qualified_name,
            "label keys such as ack.node.gpu.schedule",
        ),
        scheduler_names=_names(
            doc,
            raw.get("schedulerNames"),
            "spec.leaveAlone.schedulerNames",
            bool,
            "scheduler names such as hami-scheduler",
        ),
        pod_labels=frozen_map(labels),
    )


def load_whole_gpu_pods(doc: PolicyDocument, raw: Any) -> WholeGPUAction:
    """`spec.wholeGPUPods`: allow (the default) or avoidLightweight."""
    return cast(WholeGPUAction, _one_of(doc, raw, "spec.wholeGPUPods", get_args(WholeGPUAction)))


def load_placement(doc: PolicyDocument, raw: Any) -> Placement:
    """`spec.placement`: exact (the default, the seed's nodeSelector) or spillOver."""
    return cast(Placement, _one_of(doc, raw, "spec.placement", get_args(Placement)))


def _one_of(doc: PolicyDocument, raw: Any, path: str, allowed: tuple[str, ...]) -> str:
    """`raw` when it is one of `allowed`; absent is the first (the default)."""
    if raw is None:
        return allowed[0]
    if raw not in allowed:
        doc.error(path, f"must be {' or '.join(allowed)}, got {as_yaml(raw)}")
        return allowed[0]
    return str(raw)
