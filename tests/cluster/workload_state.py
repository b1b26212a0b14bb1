"""The workloads of tests/cluster/lifecycle_cases.py on the real control plane: running a
case's step, reading what the apiserver stores, and what kube-controller-manager and
kube-scheduler made of it (a case settled, its current pods, why a pod is Pending). Shared by
test_lifecycle.py (the webhook over a workload's life) and test_rewrite_lifecycle.py (the same
life on both sides of the parity)."""

from __future__ import annotations

import contextlib
import json
import subprocess

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.lifecycle_cases import KINDS, NAME, RUN, Case, Step, manifest
from tools.cluster.controlplane import ControlPlane


def read(plane: ControlPlane, path: str) -> dict | None:
    """GET an API path as JSON; None when it is not found."""
    status, body = plane.get(path)
    if status == 404:
        return None
    assert status == 200, (path, body[:500])
    return json.loads(body)


def workload_path(kind: str, namespace: str, name: str = NAME) -> str:
    return f"/apis/{KINDS[kind][0]}/namespaces/{namespace}/{kind.lower()}s/{name}"


def pods_of(plane: ControlPlane, namespace: str, selector: str = "") -> list[dict]:
    query = f"?labelSelector={selector}" if selector else ""
    return read(plane, f"/api/v1/namespaces/{namespace}/pods{query}")["items"]


def confirm_terminations(plane: ControlPlane, namespace: str) -> None:
    """The kubelet's last step for pods being deleted: once their containers stopped it
    deletes them with grace period 0 and their uid as precondition
    (pkg/kubelet/status/status_manager.go `syncPod`). Without it a bound pod stays
    Terminating and a StatefulSet never replaces it."""
    for found in pods_of(plane, namespace):
        meta = found["metadata"]
        if meta.get("deletionTimestamp"):
            options = client.V1DeleteOptions(
                grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta["uid"])
            )
            with contextlib.suppress(ApiException):  # already gone, or replaced meanwhile
                client.CoreV1Api(plane.api()).delete_namespaced_pod(
                    meta["name"], namespace, body=options
                )


def revision(rs: dict) -> int:
    return int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"])


def newest_replica_set(plane: ControlPlane, namespace: str) -> dict | None:
    sets = read(plane, f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
    return max(sets, key=revision, default=None)


def caught_up(obj: dict) -> bool:
    return obj["status"].get("observedGeneration") == obj["metadata"]["generation"]


def settled(case: Case, plane: ControlPlane, namespace: str) -> bool:
    """The case's controllers did what its last change asks (see lifecycle_cases.py for what
    they do without ready pods)."""
    confirm_terminations(plane, namespace)
    obj = read(plane, workload_path(case.kind, namespace))
    if case.kind == "Deployment":
        if obj and not (
            caught_up(obj) and obj["status"].get("updatedReplicas") == obj["spec"]["replicas"]
        ):
            return False
        rs = newest_replica_set(plane, namespace)
        if obj is None and case.pods == ():
            return rs is None
        return (
            bool(rs) and caught_up(rs) and rs["status"].get("replicas", 0) == rs["spec"]["replicas"]
        )
    if case.kind == "StatefulSet":
        status = obj["status"]
        return (
            caught_up(obj)
            and status.get("replicas") == status.get("updatedReplicas") == obj["spec"]["replicas"]
        )
    if case.kind == "Job":
        return obj is None or obj["status"].get("active") == obj["spec"]["parallelism"]
    if RUN in case.steps:
        run = read(plane, f"/apis/batch/v1/namespaces/{namespace}/jobs/gpu-run")
        return bool(run) and run["status"].get("active") == 1
    return True


def current_pods(case: Case, plane: ControlPlane, namespace: str, obj: dict | None) -> list[dict]:
    """The pods of the workload's current revision: the newest ReplicaSet's, the StatefulSet's
    update revision's, the Job's, or the CronJob's run's."""
    if case.kind == "Deployment":
        rs = newest_replica_set(plane, namespace)
        selector = (
            f"pod-template-hash={rs['metadata']['labels']['pod-template-hash']}" if rs else None
        )
    elif case.kind == "StatefulSet":
        selector = f"controller-revision-hash={obj['status']['updateRevision']}"
    else:
        job = NAME if case.kind == "Job" else "gpu-run"
        selector = f"batch.kubernetes.io/job-name={job}"
    return pods_of(plane, namespace, selector) if selector else []


def unschedulable(found: dict) -> str:
    """The scheduler's reason for a Pending pod, or ''."""
    for condition in found.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return condition.get("message", "")
    return ""


def placed(
    plane: ControlPlane, namespace: str, old: set[str], pending: int
) -> tuple[list[dict]] | None:
    """The live pods created after the install once `pending` of them are found unschedulable
    and the others bound (in a tuple: there may be none). Awaiting the count, not the first
    verdict, rides out a scheduler that has not yet seen the last test's pods deleted."""
    new = [
        p
        for p in pods_of(plane, namespace)
        if p["metadata"]["uid"] not in old and not p["metadata"].get("deletionTimestamp")
    ]
    bound = sum(bool(p["spec"].get("nodeName")) for p in new)
    waiting = sum(bool(unschedulable(p)) for p in new)
    return (new,) if bound == len(new) - pending and waiting == pending else None


def run_step(
    plane: ControlPlane, namespace: str, case: Case, step: Step
) -> subprocess.CompletedProcess[str]:
    """One step in `namespace` as its user would type it, with the case's file on stdin when it
    is an apply."""
    body = None
    if step.gib is not None:
        made = manifest(case.kind, namespace, step.gib, replicas=step.replicas, second=case.second)
        body = json.dumps(made)
    return plane.kubectl("-n", namespace, *step.argv(case.kind), input=body, check=False)
