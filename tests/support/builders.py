"""Builders of the objects the tests send: containers, Pods, every workload kind around a pod
template, Nodes with GPU labels, and `admission.k8s.io/v1` AdmissionReview requests.

One builder per shape. Each sets only what its arguments ask for (and a name and image), so a
case says what it is about: `pod(container(limits={"aliyun.com/gpu-mem": 2}))` is a Pod asking
2 GiB of GPU memory and nothing else.
"""

from __future__ import annotations

import uuid
from typing import Any

from webhook.api.types import KubeObject
from webhook.api.workload import TEMPLATE_PATHS

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
MEM, NAME = "aliyun.accelerator/nvidia_mem", "aliyun.accelerator/nvidia_name"
# A secret in an env value: the server may never log it (see `gpu_pod`).
SECRET_ENV = {"name": "API_TOKEN", "value": "s3cr3t"}
# (apiVersion, kind) of every kind that carries a pod template, from the decision's own table.
WORKLOAD_KINDS = tuple((f"{group}/v1" if group else "v1", kind) for group, kind in TEMPLATE_PATHS)


def container(
    name: str = "cuda",
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    **extra: Any,
) -> KubeObject:
    """A container; `limits`/`requests` go under `resources` only when given (`resources=`
    in `extra` sets the whole section instead, `{}`, None or a list included)."""
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v is not None}
    return {
        "name": name,
        "image": IMAGE,
        **({"resources": resources} if resources else {}),
        **extra,
    }


def gpu_mem(value: Any, name: str = "cuda", **extra: Any) -> KubeObject:
    """A container asking `aliyun.com/gpu-mem: value` (GiB, the gpushare way) in its limits."""
    return container(name, limits={"aliyun.com/gpu-mem": value}, **extra)


def pod(
    *containers: Any,
    init: tuple[KubeObject, ...] = (),
    annotations: dict[str, Any] | None = None,
    node_selector: dict[str, Any] | None = None,
    name: str = "gpu",
    **spec: Any,
) -> KubeObject:
    """A Pod manifest; with no containers it gets one asking `aliyun.com/gpu-mem: 2`.

    `spec` holds other pod spec fields as Kubernetes spells them (`affinity`, `nodeName`,
    `tolerations`, or `containers=[]` for a pod without any).
    """
    body: dict[str, Any] = {
        "containers": list(containers) or [container(limits={"aliyun.com/gpu-mem": 2})]
    }
    if init:
        body["initContainers"] = list(init)
    if node_selector is not None:
        body["nodeSelector"] = node_selector
    body.update(spec)
    metadata: dict[str, Any] = {"name": name}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def gpu_pod(
    limits: dict[str, Any],
    *,
    name: str = "trainer",
    generate_name: str | None = None,
    node_selector: dict[str, Any] | None = None,
) -> KubeObject:
    """A one-container Pod with `limits` and a secret in its env, as the server tests send it;
    `generate_name` replaces `name` if given, an empty `node_selector` is left out."""
    obj = pod(
        container(limits=limits, env=[dict(SECRET_ENV)]),
        name=name,
        node_selector=node_selector or None,
    )
    if generate_name:
        obj["metadata"] = {"generateName": generate_name}
    return obj


def workload(
    api_version: str, kind: str, template_pod: KubeObject, name: str = "gpu"
) -> KubeObject:
    """`template_pod`'s metadata (less its name) and spec as the pod template of a `kind`.

    What `template_pod` lacks, the template lacks too, so a template without metadata or
    spec can be built from a partial dict.
    """
    if kind == "Pod":
        return template_pod
    template = {k: v for k, v in template_pod.items() if k in ("metadata", "spec")}
    if "metadata" in template:
        template["metadata"] = {k: v for k, v in template["metadata"].items() if k != "name"}
    selector = {"matchLabels": {"app": name}}
    if kind == "CronJob":
        spec: dict[str, Any] = {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": template}},
        }
    elif kind == "ReplicationController":
        spec = {"selector": {"app": name}, "template": template}
    elif kind == "Job":
        spec = {"template": template}
    else:
        spec = {"selector": selector, "template": template}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def node(name: str, **labels: str) -> KubeObject:
    """A Node with exactly these labels."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def gpu_node(name: str, mem: str | None = None, gpu: str | None = None) -> KubeObject:
    """A Linux Node with the GPU labels the platform (or `label-node`) sets, those given."""
    labels = {"kubernetes.io/os": "linux"} | ({MEM: mem} if mem else {})
    return node(name, **labels | ({NAME: gpu} if gpu else {}))


def admission_review(
    obj: Any,
    *,
    operation: str = "CREATE",
    namespace: str = "default",
    uid: str | None = None,
    dry_run: bool = False,
) -> KubeObject:
    """An `admission.k8s.io/v1` AdmissionReview request for `obj`, as the apiserver sends it;
    a new uid unless given. `obj` may be anything (the fuzz tests send broken objects)."""
    api_version = obj.get("apiVersion", "v1") if isinstance(obj, dict) else "v1"
    kind = obj.get("kind", "Pod") if isinstance(obj, dict) else "Pod"
    group, _, version = str(api_version).rpartition("/")
    request = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": str(kind).lower() + "s"},
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin"},
        "object": obj,
        "oldObject": obj if operation == "UPDATE" else None,
        "dryRun": dry_run,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
