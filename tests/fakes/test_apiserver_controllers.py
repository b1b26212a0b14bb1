"""The controller doubles create and scale children as kube-controller-manager does:
pkg/controller/deployment (`FindNewReplicaSet`, `EqualIgnoreHash`, `getNewReplicaSet`,
`scaleReplicaSet`), pkg/controller/replicaset (`manageReplicas`), pkg/controller/statefulset,
pkg/controller/job (`manageJob`), pkg/controller/cronjob (`getJobFromTemplate2`) and
controller_utils.go (`ComputeHash`, `GetPodFromTemplate`); and they report ReplicaSet churn.
"""

from __future__ import annotations

import copy

import pytest

from tests.fakes.apiserver_store import Store
from tests.fakes.controller_manager import ControllerManager
from tests.fakes.controller_utils import (
    POD_TEMPLATE_HASH,
    SAFE_CHARACTERS,
    compute_hash,
    equal_ignore_hash,
    pod_from_template,
)
from tests.support.builders import gpu_mem, pod, workload
from tests.support.kubectl import requires_kubectl

NS = "default"


def labelled(api_version: str, kind: str, name: str = "gpu", replicas: int | None = None) -> dict:
    """A workload around a GPU-memory pod whose template carries the selector's label."""
    obj = workload(api_version, kind, pod(gpu_mem(2)), name=name)
    spec = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
    spec["template"]["metadata"] = {"labels": {"app": name}}
    if replicas is not None:
        obj["spec"]["replicas"] = replicas
    return obj


def pods(store: Store) -> list[dict]:
    return store.of_kind("", "Pod", NS)


def owner_of(obj: dict) -> str:
    [ref] = obj["metadata"]["ownerReferences"]
    assert ref["controller"] is True
    return ref["name"]


TEMPLATE = labelled("apps/v1", "Deployment")["spec"]["template"]


def test_compute_hash_is_stable_and_takes_the_collision_count():
    hashes = {compute_hash(TEMPLATE), compute_hash(copy.deepcopy(TEMPLATE))}
    assert len(hashes) == 1
    assert len({compute_hash(TEMPLATE, n) for n in (None, 0, 1, 2)}) == 4
    assert set("".join(hashes)) <= set(SAFE_CHARACTERS)


@pytest.mark.parametrize(
    ("change", "equal"),
    [
        (lambda t: t["metadata"]["labels"].update({POD_TEMPLATE_HASH: "abc"}), True),
        (lambda t: t["metadata"].update(annotations={}), True),  # Semantic: empty is absent
        (lambda t: t["metadata"]["labels"].update({"team": "ml"}), False),
        (lambda t: t["spec"].update(nodeSelector={"a": "b"}), False),
    ],
    ids=["hash label", "empty annotations", "another label", "a selector"],
)
def test_equal_ignore_hash(change, equal):
    other = copy.deepcopy(TEMPLATE)
    change(other)
    assert equal_ignore_hash(TEMPLATE, other) is equal


def test_a_pod_from_a_template():
    parent = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "uid": "u"}}
    made = pod_from_template(TEMPLATE, parent)
    assert made["metadata"]["generateName"] == "rs-"
    assert made["metadata"]["labels"] == {"app": "gpu"}
    assert made["spec"] == TEMPLATE["spec"] and made["spec"] is not TEMPLATE["spec"]
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u"


def cluster(*objects: dict) -> tuple[Store, ControllerManager]:
    store = Store()
    for obj in objects:
        assert store.create(obj).allowed
    manager = ControllerManager(store)
    assert manager.reconcile()
    return store, manager


def test_a_deployment_gets_a_replica_set_and_its_pods():
    store, manager = cluster(labelled("apps/v1", "Deployment", replicas=2))
    [rs] = store.of_kind("apps", "ReplicaSet", NS)
    digest = rs["spec"]["template"]["metadata"]["labels"][POD_TEMPLATE_HASH]
    assert rs["metadata"]["name"] == f"gpu-{digest}" and owner_of(rs) == "gpu"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "gpu", POD_TEMPLATE_HASH: digest}
    assert [owner_of(p) for p in pods(store)] == [rs["metadata"]["name"]] * 2
    assert manager.replica_sets_created == {"gpu": 1} and manager.refused == []


def test_scaling_a_deployment_is_a_plain_update_of_its_replica_set():
    store, manager = cluster(labelled("apps/v1", "Deployment"))
    store.scale(("apps", "Deployment", NS, "gpu"), 3)
    assert manager.reconcile()
    assert [(r.operation, r.key[1]) for r in store.requests[-4:]] == [
        ("UPDATE scale", "Deployment"),
        ("UPDATE", "ReplicaSet"),
        ("CREATE", "Pod"),
        ("CREATE", "Pod"),
    ]
    assert len(pods(store)) == 3 and manager.replica_sets_created == {"gpu": 1}


def test_a_template_change_rolls_out_a_new_replica_set():
    store, manager = cluster(labelled("apps/v1", "Deployment", replicas=2))
    [old] = store.of_kind("apps", "ReplicaSet", NS)
    annotate = {"kubectl.kubernetes.io/restartedAt": "2026-01-02T00:00:00Z"}
    store.change(
        ("apps", "Deployment", NS, "gpu"),
        lambda o: o["spec"]["template"]["metadata"].update(annotations=annotate),
    )
    assert manager.reconcile()
    by_name = {rs["metadata"]["name"]: rs for rs in store.of_kind("apps", "ReplicaSet", NS)}
    assert by_name.pop(old["metadata"]["name"])["spec"]["replicas"] == 0
    [new] = by_name
    assert [owner_of(p) for p in pods(store)] == [new, new]
    assert manager.replica_sets_created == {"gpu": 2}


def rewrite_replica_sets(obj: dict) -> list:
    """Another webhook that rewrites ReplicaSet templates, as lwgpu must not."""
    if obj["kind"] != "ReplicaSet":
        return []
    return [{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"a": "b"}}]


@requires_kubectl
def test_a_webhook_that_rewrites_replica_sets_makes_the_controller_churn():
    store = Store()
    store.install(store.admission.with_local_webhook("rewrite", rewrite_replica_sets))
    store.create(labelled("apps/v1", "Deployment"))
    manager = ControllerManager(store)
    assert not manager.reconcile(rounds=8)
    assert manager.replica_sets_created["gpu"] >= 3
    assert store.get(("apps", "Deployment", NS, "gpu"))["status"]["collisionCount"] >= 2


def scale_replica_set(store: Store, replicas: int) -> None:
    [rs] = store.of_kind("apps", "ReplicaSet", NS)
    key = ("apps", "ReplicaSet", NS, rs["metadata"]["name"])
    store.change(key, lambda o: o["spec"].update(replicas=replicas))


def test_a_replica_set_deletes_its_youngest_pods_and_its_deployment_scales_it_back():
    store, manager = cluster(labelled("apps/v1", "ReplicaSet", replicas=3))
    oldest = pods(store)[0]["metadata"]["name"]
    scale_replica_set(store, 1)
    assert manager.reconcile()
    assert [p["metadata"]["name"] for p in pods(store)] == [oldest]
    deployed, manager = cluster(labelled("apps/v1", "Deployment", replicas=2))
    scale_replica_set(deployed, 5)
    assert manager.reconcile()
    assert len(pods(deployed)) == 2  # the deployment controller scaled it back to 2


def test_a_cronjob_run_makes_a_job_and_the_job_a_pod():
    store, manager = cluster(labelled("batch/v1", "CronJob", name="nightly"))
    job = manager.run_cronjob(("batch", "CronJob", NS, "nightly"), 29000000)
    assert job["metadata"]["name"] == "nightly-29000000" and owner_of(job) == "nightly"
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == (
        "2025-02-19T21:20:00Z"
    )
    assert (
        job["spec"] == store.get(("batch", "CronJob", NS, "nightly"))["spec"]["jobTemplate"]["spec"]
    )
    assert manager.run_cronjob(("batch", "CronJob", NS, "nightly"), 29000000) == job  # ran once
    assert manager.reconcile()
    [made] = pods(store)
    assert owner_of(made) == "nightly-29000000"
    assert made["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]


def test_a_job_keeps_parallelism_pods_until_suspended():
    job = labelled("batch/v1", "Job")
    job["spec"]["parallelism"] = 2
    store, manager = cluster(job)
    assert len(pods(store)) == 2
    assert store.get(("batch", "Job", NS, "gpu"))["status"]["startTime"]
    store.change(("batch", "Job", NS, "gpu"), lambda o: o["spec"].update(suspend=True))
    assert manager.reconcile() and pods(store) == []


def test_a_stateful_set_names_its_pods_and_replaces_them_on_a_template_change():
    statefulset = labelled("apps/v1", "StatefulSet", name="db", replicas=2)
    store, manager = cluster(statefulset)
    first = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(store)}
    assert set(first) == {"db-0", "db-1"}
    assert pods(store)[0]["spec"]["hostname"] == "db-0"
    store.change(
        ("apps", "StatefulSet", NS, "db"),
        lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image="cuda:13"),
    )
    assert manager.reconcile()
    second = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(store)}
    assert set(second) == set(first) and not set(second.values()) & set(first.values())
    assert {p["spec"]["containers"][0]["image"] for p in pods(store)} == {"cuda:13"}
    store.scale(("apps", "StatefulSet", NS, "db"), 1)
    assert manager.reconcile()
    assert [p["metadata"]["name"] for p in pods(store)] == ["db-0"]


def break_pods(obj: dict) -> list:
    """Another webhook whose patch makes a Pod invalid (a request below its extended limit)."""
    if obj["kind"] != "Pod":
        return []
    path = "/spec/containers/0/resources/requests/aliyun.com~1gpu-mem"
    return [{"op": "replace", "path": path, "value": 1}]


@requires_kubectl
def test_a_refused_pod_create_is_reported():
    store = Store()
    store.install(store.admission.with_local_webhook("break", break_pods))
    store.create(labelled("apps/v1", "Deployment", replicas=3))
    manager = ControllerManager(store)
    manager.reconcile(rounds=2)
    assert pods(store) == [] and len(manager.refused) == 2  # one per round: the batch stops
    assert all(
        "must be equal to aliyun.com/gpu-mem limit of 2" in r.message for r in manager.refused
    )
