"""What the controller doubles share, after kube-controller-manager's own helpers.

- `controller_ref`: `metav1.NewControllerRef` (apimachinery/pkg/apis/meta/v1/controller_ref.go);
  `controlled_by`: `metav1.IsControlledBy` (the controller reference's uid is the owner's);
- `compute_hash`: `pkg/controller/controller_utils.go` `ComputeHash`: FNV-32a of the pod template
  (here its sorted JSON, where Go hashes the struct with `DeepHashObject`), then the collision
  count as 8 little-endian bytes, printed in decimal and encoded by `rand.SafeEncodeString`;
- `pod_from_template`: `controller_utils.go` `GetPodFromTemplate`: the template's labels,
  annotations, finalizers and spec, `generateName` `<owner>-` and the controller reference;
- `equal_ignore_hash`: `pkg/controller/deployment/util/deployment_util.go` `EqualIgnoreHash`:
  two templates equal once the `pod-template-hash` label is dropped from both.
"""

from __future__ import annotations

import copy
import json

from tests.fakes.apiserver_store import Key, key_of
from tests.fakes.apiserver_validation import semantically_equal

POD_TEMPLATE_HASH = "pod-template-hash"  # apps.DefaultDeploymentUniqueLabelKey
SAFE_CHARACTERS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand alphanums
FNV_OFFSET, FNV_PRIME = 0x811C9DC5, 0x01000193


def controller_ref(owner: dict) -> dict:
    """The ownerReference a controller sets on what it creates."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controlled_by(obj: dict, owner: dict) -> bool:
    """Whether `owner` is `obj`'s controller."""
    return any(
        ref.get("controller") is True and ref.get("uid") == owner["metadata"]["uid"]
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


def owned(objects: list[dict], owner: dict) -> list[dict]:
    """The objects `owner` controls that are not being deleted."""
    return [
        o for o in objects if controlled_by(o, owner) and not o["metadata"].get("deletionTimestamp")
    ]


def compute_hash(template: dict, collision_count: int | None = None) -> str:
    """`ComputeHash` of a pod template and the collision count."""
    value = FNV_OFFSET
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(8, "little")
    for byte in data:
        value = ((value ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return "".join(SAFE_CHARACTERS[ord(c) % len(SAFE_CHARACTERS)] for c in str(value))


def equal_ignore_hash(one: dict, other: dict) -> bool:
    """`EqualIgnoreHash` of two pod templates."""
    one, other = copy.deepcopy(one or {}), copy.deepcopy(other or {})
    for template in (one, other):
        ((template.get("metadata") or {}).get("labels") or {}).pop(POD_TEMPLATE_HASH, None)
    return semantically_equal(one, other)


def pod_from_template(template: dict, parent: dict) -> dict:
    """`GetPodFromTemplate` with the parent as controller."""
    meta = template.get("metadata") or {}
    pod_meta = {
        "generateName": f"{parent['metadata']['name']}-",
        "ownerReferences": [controller_ref(parent)],
    }
    for field in ("labels", "annotations", "finalizers"):
        if meta.get(field):
            pod_meta[field] = copy.deepcopy(meta[field])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def replicas(obj: dict) -> int:
    """`spec.replicas`, 1 when unset (what `SetDefaults_Deployment` and its kin give)."""
    value = obj["spec"].get("replicas")
    return 1 if value is None else value


def key(obj: dict) -> Key:
    """Where the store keeps `obj`."""
    return key_of(obj)
