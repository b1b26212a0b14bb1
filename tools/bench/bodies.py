"""The AdmissionReview bodies the benchmarks send, as raw JSON bytes.

The seed pod is the Pod that the seed's `cuda-sample` Deployment (asking
`aliyun.com/gpu-mem: 2`, `examples/cuda-sample-gpu-mem.yaml`) makes its
ReplicaSet create, with the fields the apiserver fills in before it calls
admission webhooks (defaults, the service-account token volume, the
not-ready/unreachable tolerations): what the webhook really receives.
Bigger pods add plain sidecars (only one container may use the one GPU), or
environment variables until the object is just under the apiserver's 3 MiB
request limit.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import yaml

from tools.paths import REPO

EXAMPLES = REPO / "examples"
# apiserver MaxRequestBodyBytes: the largest object a client can create.
APISERVER_LIMIT = 3 * 1024 * 1024
NEAR_LIMIT = APISERVER_LIMIT - 64 * 1024
UID = "0f6c2a1e-7b3d-4c6b-9a55-3f1d2c9b8a01"


def seed_deployment() -> dict[str, Any]:
    """The seed's `cuda-sample` Deployment as people write it (asks `aliyun.com/gpu-mem: 2`)."""
    deployment: dict[str, Any] = yaml.safe_load((EXAMPLES / "cuda-sample-gpu-mem.yaml").read_text())
    return deployment


def _defaulted_container(container: dict[str, Any]) -> dict[str, Any]:
    return {
        **container,
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {
                "name": "kube-api-access-7xk2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
    }


def seed_pod() -> dict[str, Any]:
    """The Pod the seed Deployment's ReplicaSet creates, as the apiserver hands it to webhooks."""
    template = seed_deployment()["spec"]["template"]
    spec = template["spec"]
    labels = {**template["metadata"]["labels"], "pod-template-hash": "6d4cf56db6"}
    token = {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
    ca = {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    namespace = {
        "downwardAPI": {
            "items": [
                {
                    "path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                }
            ]
        }
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "cuda-sample-6d4cf56db6-",
            "namespace": "default",
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "cuda-sample-6d4cf56db6",
                    "uid": "4b1f0c57-2f7e-4f0e-9a0b-6a1d2b3c4d5e",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2024-05-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}}
                    },
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-7xk2p",
                    "projected": {"sources": [token, ca, namespace], "defaultMode": 420},
                }
            ],
            "containers": [_defaulted_container(c) for c in spec["containers"]],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{taint}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for taint in ("not-ready", "unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }


def lightweight_pod() -> dict[str, Any]:
    """The seed pod already in the seed's form (`nvidia.com/gpu: 1` + selector): allowed as is."""
    pod = seed_pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    pod["spec"]["nodeSelector"] = {"aliyun.accelerator/nvidia_mem": "2048MiB"}
    return pod


def sidecar(index: int, env: int = 4) -> dict[str, Any]:
    """A plain (non-GPU) container such as a log shipper or proxy, with `env` variables."""
    return _defaulted_container(
        {
            "name": f"sidecar-{index}",
            "image": f"registry.example.com/team/sidecar-{index}:1.{index}.0",
            "args": ["--port", str(9000 + index), "--log-level", "info"],
            "ports": [{"name": f"http-{index}", "containerPort": 9000 + index, "protocol": "TCP"}],
            "env": [
                {"name": f"SIDECAR_{index}_SETTING_{n}", "value": f"value-{n}"} for n in range(env)
            ],
            "resources": {
                "requests": {"cpu": "50m", "memory": "64Mi"},
                "limits": {"cpu": "200m", "memory": "128Mi"},
            },
        }
    )


def pod_with_containers(count: int) -> dict[str, Any]:
    """The seed pod with `count` containers: the GPU one first, then `count - 1` sidecars."""
    pod = seed_pod()
    pod["spec"]["containers"] += [sidecar(i) for i in range(1, count)]
    return pod


def pod_near_limit(size: int = NEAR_LIMIT) -> dict[str, Any]:
    """The seed pod grown with environment variables (and a large annotation) to about `size`."""
    pod = seed_pod()
    pod["metadata"]["annotations"] = {"example.com/config": "x" * (200 * 1024)}
    containers = pod["spec"]["containers"]
    containers += [sidecar(i, env=0) for i in range(1, 10)]
    item = {"name": "FEATURE_FLAG_000000", "value": "enabled-for-tenant-abcdefghijklmnopqrstuvwxyz"}
    step = len(orjson.dumps(item)) + 1
    missing = size - len(orjson.dumps(pod))
    for n in range(max(0, missing // step)):
        entry = copy.copy(item)
        entry["name"] = f"FEATURE_FLAG_{n:06d}"
        containers[n % len(containers)].setdefault("env", []).append(entry)
    return pod


def review(obj: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    """An `admission.k8s.io/v1` AdmissionReview CREATE for `obj`, as the apiserver sends it."""
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = obj["kind"]
    gvk = {"group": group, "version": version, "kind": kind}
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": UID,
            "kind": gvk,
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "requestKind": gvk,
            "requestResource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "a3c4e5f6-0000-4000-8000-000000000001",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
            },
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def body(obj: dict[str, Any], namespace: str = "default") -> bytes:
    """The raw request body for `obj` in `namespace` (compact JSON, as the apiserver's encoder
    writes it)."""
    if "namespace" in obj.get("metadata", {}):
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    return orjson.dumps(review(obj, namespace))


def cases() -> dict[str, bytes]:
    """The in-process cases of issue 7, by name."""
    return {
        "seed pod (rewritten)": body(seed_pod()),
        "seed pod, lightweight form (allowed)": body(lightweight_pod()),
        "seed Deployment (rewritten)": body(seed_deployment()),
        "20-container pod (rewritten)": body(pod_with_containers(20)),
        "~3 MiB pod (rewritten)": body(pod_near_limit()),
    }
