"""`policy explain NAMESPACE`: which policy governs a namespace, why, and what it does there.

For an admin before rollout: every loaded policy's verdict on the namespace (the pattern
that decided it), the governing one's classes in the order the webhook tries them, and
what happens to GPU asks there.
"""

from __future__ import annotations

from webhook.policy import Policy, PolicySet


def _verdicts(policies: PolicySet, namespace: str) -> list[str]:
    lines = []
    for policy in policies.policies:
        claim = policy.claim(namespace)
        if claim is None:
            why = "no include pattern matches"
        else:
            why = f"{'excluded' if claim[0] == 'exclude' else 'included'} by {claim[1]!r}"
        lines.append(f"  {policy.name} ({policy.source}): {why}")
    return lines


def _size(unit: int) -> str:
    return f"{unit >> 30}Gi" if unit % (1 << 30) == 0 else f"{unit >> 20}Mi"


def _behaviour(policy: Policy) -> list[str]:
    resources = ", ".join(f"{r} (units of {_size(u)})" for r, u in policy.memory_resources.items())
    lines = [
        "mode: "
        + (
            "audit: decides as below, but admits every object as it came, warning what "
            "enforce mode would do (would-mutate, would-deny)"
            if policy.mode == "audit"
            else "enforce: rewrites and refuses as below"
        ),
        "classes, smallest first (ties in the order listed): "
        + ", ".join(f"{p.name} {p.memory_mib}Mi [{p.selector_text}]" for p in policy.profiles),
        f"memory asks read from: {resources or 'no resource'}"
        + (f"; annotation {policy.annotation}" if policy.annotation else ""),
        f"a pod asking memory: nvidia.com/gpu: 1 on the smallest class that holds its largest "
        f"ask; more than {policy.profiles[-1].memory_mib}Mi is "
        + ("left unchanged" if policy.when_no_profile_fits == "ignore" else "refused"),
        "placement: "
        + (
            "spillOver: required affinity on every class that holds the ask, the smallest preferred"
            if policy.placement == "spillOver"
            else "exact: the nodeSelector of the smallest class that holds the ask"
        ),
        f"at most {policy.max_gpus_per_pod} GPU per pod on a lightweight class",
        "whole-GPU pods: "
        + (
            "kept off the lightweight classes"
            if policy.whole_gpu_pods == "avoidLightweight"
            else "left to go wherever they fit"
        ),
    ]
    leave = policy.leave_alone
    others = [
        *(f"pods selecting {k}" for k in leave.node_selector_keys),
        *(f"pods of scheduler {s}" for s in leave.scheduler_names),
        *(f"pods labelled {k}={v}" for k, v in leave.pod_labels.items()),
    ]
    if others:
        lines.append("left alone: " + ", ".join(others))
    if not policy.allow_skip:
        lines.append("lwgpu.io/skip: ignored (allowSkip: false): no pod or workload opts out")
    return lines


def explain(policies: PolicySet, namespace: str) -> list[str]:
    """The lines `policy explain` prints for `namespace`."""
    governing = policies.for_namespace(namespace)
    head = (
        f"namespace {namespace}: governed by policy {governing.name!r} ({governing.source})"
        if governing
        else f"namespace {namespace}: governed by no policy; the webhook leaves its pods alone"
    )
    lines = [head, "policies:", *_verdicts(policies, namespace)]
    if governing is not None:
        lines += _behaviour(governing)
    return lines
