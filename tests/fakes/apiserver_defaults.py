"""The defaults the apiserver gives an object as it decodes it; a test double of the part that
matters to GPU resources.

`pkg/apis/core/v1/defaults.go`, `SetDefaults_Pod`: in a Pod (and only a Pod: "we only want this
defaulting semantic to take place on a v1.Pod and not a v1.PodTemplate"), every container and
init container whose `resources.limits` is set gets each limit it has no request for copied into
`resources.requests`. So a Pod asking `limits: {aliyun.com/gpu-mem: 2}` reaches the webhooks with
`requests: {aliyun.com/gpu-mem: 2}` as well, and a patched Pod is defaulted again after each
webhook (the dispatcher calls `default` on the patched object).

Left out: every other default (restartPolicy, dnsPolicy, terminationGracePeriodSeconds,
schedulerName, imagePullPolicy, the workloads' replicas and strategies); nothing here reads them.
"""

from __future__ import annotations

import copy


def set_defaults_pod(pod: dict) -> dict:
    """`pod` with `SetDefaults_Pod`'s requests; the input is not changed."""
    pod = copy.deepcopy(pod)
    spec = pod.get("spec")
    for section in ("containers", "initContainers"):
        containers = spec.get(section) if isinstance(spec, dict) else None
        for container in containers if isinstance(containers, list) else []:
            resources = container.get("resources") if isinstance(container, dict) else None
            limits = resources.get("limits") if isinstance(resources, dict) else None
            if not isinstance(limits, dict) or not limits:
                continue
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in limits.items():
                    requests.setdefault(name, value)
    return pod


def default(obj: dict) -> dict:
    """`obj` with the defaults of its kind (a copy); other kinds come back unchanged."""
    if obj.get("apiVersion") == "v1" and obj.get("kind") == "Pod":
        return set_defaults_pod(obj)
    return copy.deepcopy(obj)
