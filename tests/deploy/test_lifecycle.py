"""Workloads over their life, through the install: the real server over real TLS behind the
apiserver double (tests/fakes/apiserver_harness.py) with its registry (apiserver_store.py:
defaulting, validation, UPDATEs with oldObject), controllers (controller_*.py) and apply
(kubectl_apply.py: client-side three-way merge; apiserver_fieldmanager.py: server-side).

Each case creates a Deployment, StatefulSet, Job or CronJob with `kubectl apply` BEFORE the
webhook is installed (stored unreviewed, its controller's children too), installs it, then runs
what users and controllers do next. Another mutating webhook after lwgpu's changes an annotation
on every request, so the apiserver reinvokes lwgpu's (`reinvocationPolicy: IfNeeded`) on each
request it reviewed. Every case checks: the last step's outcome, that no reinvocation patches,
that nothing else was refused, that the controllers settle with no ReplicaSet churn (only the
ReplicaSets a template change calls for), that every stored object passes the double's
validation and schema, and on which class (selector and lwgpu.io/profile, nothing stale) the
template and the pods created after the install end.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from tests.fakes.apiserver_fieldmanager import ServerSideApply
from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_install import running
from tests.fakes.apiserver_rules import schema_error
from tests.fakes.apiserver_store import Key, Store
from tests.fakes.apiserver_validation import validate
from tests.fakes.controller_manager import ControllerManager
from tests.fakes.kubectl_apply import apply
from tests.support.builders import gpu_mem, pod, workload
from tests.support.kubectl import requires_kubectl

pytestmark = requires_kubectl

MUTATE, VALIDATE, TOUCH = "mutate.lwgpu.io", "validate.lwgpu.io", "touch"
MEM, GPU, SELECTOR = "aliyun.com/gpu-mem", "nvidia.com/gpu", "aliyun.accelerator/nvidia_mem"
PROFILE = "lwgpu.io/profile"
CLASSES = {1: ("GRID-P4-1Q", "1024MiB"), 2: ("GRID-P4-2Q", "2048MiB"), 4: ("GRID-P4-4Q", "4096MiB")}
NS, NAME = "default", "gpu"
KINDS = {  # kind -> (apiVersion, where its pod template sits)
    "Deployment": ("apps/v1", ("spec", "template")),
    "StatefulSet": ("apps/v1", ("spec", "template")),
    "Job": ("batch/v1", ("spec", "template")),
    "CronJob": ("batch/v1", ("spec", "jobTemplate", "spec", "template")),
}


def template_of(obj: dict) -> dict:
    """The pod template of a workload of one of KINDS."""
    for step in KINDS[obj["kind"]][1]:
        obj = obj[step]
    return obj


def manifest(kind: str, gib: int = 2, **spec: object) -> dict:
    """The user's file: a `kind` asking `aliyun.com/gpu-mem: gib`, with these spec fields."""
    obj = workload(KINDS[kind][0], kind, pod(gpu_mem(gib)), name=NAME)
    template_of(obj)["metadata"] = {"labels": {"app": NAME}}
    obj["spec"].update(spec)
    return obj


@dataclass
class Cluster:
    """One case's store, controllers and server-side applier, for one workload kind."""

    kind: str
    store: Store = field(default_factory=Store)
    ssa: ServerSideApply = field(init=False)
    manager: ControllerManager = field(init=False)
    minutes: itertools.count = field(default_factory=lambda: itertools.count(29_000_000))

    def __post_init__(self) -> None:
        self.ssa = ServerSideApply(self.store)
        self.manager = ControllerManager(self.store)

    @property
    def key(self) -> Key:
        return (KINDS[self.kind][0].split("/")[0], self.kind, NS, NAME)


Step = Callable[[Cluster], "Result | dict | None"]


def named(name: str, step: Step) -> Step:
    step.__name__ = name
    return step


def change(name: str, edit: Callable[[dict], None]) -> Step:
    """A GET, an edit and a PUT (what `kubectl label`, `patch`, `set image` send)."""
    return named(name, lambda c: c.store.change(c.key, edit))


def client_apply(gib: int, **spec: object) -> Step:
    return named(f"apply {gib}", lambda c: apply(c.store, manifest(c.kind, gib, **spec)))


def server_apply(gib: int) -> Step:
    return named(f"apply --server-side {gib}", lambda c: c.ssa.apply(manifest(c.kind, gib)))


def scale(replicas: int) -> Step:
    return named(f"scale {replicas}", lambda c: c.store.scale(c.key, replicas))


def hpa_scales_the_replica_set(cluster: Cluster) -> None:
    """The HPA's scale subresource on the Deployment's ReplicaSet; its controller undoes it."""
    [rs] = cluster.store.of_kind("apps", "ReplicaSet", NS)
    cluster.store.scale(("apps", "ReplicaSet", NS, rs["metadata"]["name"]), 3)


def run_cronjob(cluster: Cluster) -> None:
    assert cluster.manager.run_cronjob(cluster.key, next(cluster.minutes)) is not None


def deleted_then_released(cluster: Cluster) -> Result:
    """`kubectl delete` waits on the finalizer; its controller then removes it."""
    cluster.store.delete(cluster.key)
    return cluster.store.change(cluster.key, lambda o: o["metadata"].pop("finalizers"))


def restarted(obj: dict) -> None:  # kubectl rollout restart
    restart = {"kubectl.kubernetes.io/restartedAt": "2026-03-01T10:00:00Z"}
    template_of(obj)["metadata"].setdefault("annotations", {}).update(restart)


def new_image(obj: dict) -> None:  # kubectl set image ... cuda=nvidia/cuda:12.6.0
    template_of(obj)["spec"]["containers"][0]["image"] = "nvidia/cuda:12.6.0-base-ubuntu22.04"


LABEL = change("kubectl label", lambda o: o["metadata"].setdefault("labels", {}).update(team="ml"))
RESTART = change("rollout restart", restarted)
SET_IMAGE = change("set image", new_image)
PARALLELISM = change("parallelism 2", lambda o: o["spec"].update(parallelism=2))
HPA = named("HPA scales the ReplicaSet", hpa_scales_the_replica_set)
RUN = named("a scheduled run", run_cronjob)
RELEASE = named("delete, finalizer removed", deleted_then_released)


@dataclass(frozen=True)
class Case:
    """What is done to a workload after the install, and how it must end.

    `outcome` is the last step's: "unpatched" (reviewed, left as it was), "patched", "not sent"
    (no request reached the webhooks) or a refusal's words. `template` and `pods` are the GiB
    of the class the template and the pods created after the install end on (None: the template
    is as written; no pod was created). `replica_sets`: new ReplicaSets a template change needs;
    `scaled`: ReplicaSet UPDATEs the webhooks reviewed and left alone.
    """

    kind: str
    steps: tuple[Step, ...]
    outcome: str
    template: int | None = None
    pods: int | None = None
    replica_sets: int = 0
    created_by: str = "apply"  # or "apply --server-side", or "apply after the install"
    gone: bool = False
    scaled: int = 0  # plain UPDATEs of a ReplicaSet's replicas (sync.go scaleReplicaSet)


IMMUTABLE = "field is immutable"
CASES = {
    # Deployment: scaling and metadata leave the template alone; its ReplicaSet is found again.
    "Deployment kubectl scale": Case("Deployment", (scale(3),), "not sent", None, 2, scaled=1),
    "Deployment replicas by apply": Case(
        "Deployment", (client_apply(2, replicas=3),), "unpatched", None, 2, scaled=1
    ),
    "Deployment label": Case("Deployment", (LABEL,), "unpatched"),
    "Deployment finalizer removal": Case("Deployment", (RELEASE,), "unpatched", gone=True),
    "Deployment rollout restart": Case("Deployment", (RESTART,), "patched", 2, 2, 1, scaled=1),
    "Deployment set image": Case("Deployment", (SET_IMAGE,), "patched", 2, 2, 1, scaled=1),
    "Deployment HPA scales its ReplicaSet": Case("Deployment", (HPA,), "not sent", scaled=1),
    "Deployment apply 2->4": Case("Deployment", (client_apply(4),), "patched", 4, 4, 1, scaled=1),
    "Deployment apply 2->4->1": Case(
        "Deployment", (client_apply(4), client_apply(1)), "patched", 1, 1, 2, scaled=2
    ),
    "Deployment apply 2->4->4": Case(
        "Deployment", (client_apply(4), client_apply(4)), "patched", 4, 4, 1, scaled=1
    ),
    "Deployment server-side 2->4": Case(
        "Deployment", (server_apply(4),), "patched", 4, 4, 1, "apply --server-side", scaled=1
    ),
    "Deployment server-side 2->4->1": Case(
        "Deployment",
        (server_apply(4), server_apply(1)),
        "patched",
        1,
        1,
        2,
        "apply --server-side",
        scaled=2,
    ),
    "Deployment after the install, apply 2->4": Case(
        "Deployment", (client_apply(4),), "patched", 4, 4, 1, "apply after the install", scaled=1
    ),
    # StatefulSet: pods are replaced from the template on a change, never by a ReplicaSet.
    "StatefulSet kubectl scale": Case("StatefulSet", (scale(2),), "not sent", None, 2),
    "StatefulSet label": Case("StatefulSet", (LABEL,), "unpatched"),
    "StatefulSet rollout restart": Case("StatefulSet", (RESTART,), "patched", 2, 2),
    "StatefulSet set image": Case("StatefulSet", (SET_IMAGE,), "patched", 2, 2),
    "StatefulSet apply 2->4->1": Case(
        "StatefulSet", (client_apply(4), client_apply(1)), "patched", 1, 1
    ),
    "StatefulSet server-side 2->4->1": Case(
        "StatefulSet",
        (server_apply(4), server_apply(1)),
        "patched",
        1,
        1,
        created_by="apply --server-side",
    ),
    # Job: its template is immutable; the apiserver refuses a change, the webhook never does.
    "Job label": Case("Job", (LABEL,), "unpatched"),
    "Job finalizer removal": Case("Job", (RELEASE,), "unpatched", gone=True),
    "Job parallelism": Case("Job", (PARALLELISM,), "unpatched", None, 2),
    "Job apply 2->4": Case("Job", (client_apply(4),), IMMUTABLE),
    "Job set image": Case("Job", (SET_IMAGE,), IMMUTABLE),
    "Job server-side 2->4": Case(
        "Job", (server_apply(4),), IMMUTABLE, created_by="apply --server-side"
    ),
    # CronJob: its Jobs are left alone, their pods decided at Pod CREATE.
    "CronJob label": Case("CronJob", (LABEL,), "unpatched"),
    "CronJob scheduled run": Case("CronJob", (RUN,), "not sent", None, 2),
    "CronJob set image, run": Case("CronJob", (SET_IMAGE, RUN), "not sent", 2, 2),
    "CronJob apply 2->4, run": Case("CronJob", (client_apply(4), RUN), "not sent", 4, 4),
    "CronJob apply 2->4->1, run": Case(
        "CronJob", (client_apply(4), client_apply(1), RUN), "not sent", 1, 1
    ),
    "CronJob server-side 2->4->1, run": Case(
        "CronJob",
        (server_apply(4), server_apply(1), RUN),
        "not sent",
        1,
        1,
        created_by="apply --server-side",
    ),
}


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    with running(tmp_path_factory.mktemp("lifecycle")) as (apiserver, _):
        yield apiserver


def touch_annotation() -> Callable[[dict], list]:
    """Another mutating webhook: a new annotation value on every request (so lwgpu's is
    reinvoked whenever it was called)."""
    counter = itertools.count(1)

    def touch(obj: dict) -> list:
        value = str(next(counter))
        if (obj.get("metadata") or {}).get("annotations"):
            return [
                {"op": "add", "path": "/metadata/annotations/touch.example.com~1n", "value": value}
            ]
        return [
            {"op": "add", "path": "/metadata/annotations", "value": {"touch.example.com/n": value}}
        ]

    return touch


def create(cluster: Cluster, case: Case) -> Result:
    obj = manifest(case.kind, 2)
    if case.gone:
        obj["metadata"]["finalizers"] = ["example.com/protect"]
    if case.created_by == "apply --server-side":
        return cluster.ssa.apply(obj)
    return apply(cluster.store, obj)


def reviewed(result: Result | None) -> bool:
    return result is not None and MUTATE in result.called


def mutate_patches(result: Result) -> list:
    return [c.patch for c in result.calls if c.webhook == MUTATE and not c.reinvocation]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_lifecycle(install, case):
    cluster = Cluster(case.kind)
    after = case.created_by == "apply after the install"
    if after:
        cluster.store.install(install.with_local_webhook(TOUCH, touch_annotation()))
    created = create(cluster, case)
    assert created.allowed, created.message
    assert [bool(p) for p in mutate_patches(created)] == ([True] if after else [])
    assert cluster.manager.reconcile()
    written = cluster.store.get(cluster.key)
    if not after:
        cluster.store.install(install.with_local_webhook(TOUCH, touch_annotation()))
    start, sets = len(cluster.store.requests), cluster.manager.replica_sets_created[NAME]
    try:
        for step in case.steps:
            last = step(cluster)
            assert cluster.manager.reconcile(), f"{step.__name__}: the controllers never settle"
        check_outcome(case, last if isinstance(last, Result) else None, cluster, written)
        check_requests(case, cluster.store.requests[start:])
        assert cluster.manager.refused == []
        assert cluster.manager.replica_sets_created[NAME] - sets == case.replica_sets
        settled = len(cluster.store.requests)
        assert cluster.manager.reconcile() and len(cluster.store.requests) == settled
        check_stored(cluster.store)
        check_classes(case, cluster, written, start)
    finally:
        cluster.store.admission.close()


def check_outcome(case: Case, last: Result | None, cluster: Cluster, written: dict) -> None:
    """The last step was sent or not, patched or not, refused or not, as the case says."""
    if case.outcome == "not sent":
        assert last is None
    elif case.outcome in ("unpatched", "patched"):
        assert last.allowed, last.message
        assert last.called == [MUTATE, TOUCH, MUTATE, VALIDATE]
        assert [bool(p) for p in mutate_patches(last)] == [case.outcome == "patched"]
    else:  # refused by the apiserver's validation; the webhook neither caused nor hid it
        assert not last.allowed and case.outcome in last.message, last.message
        assert last.message.startswith(f'{case.kind}.batch "{NAME}" is invalid: spec.template')
        assert last.called == [MUTATE, TOUCH, MUTATE] and mutate_patches(last) == [None]
        assert template_of(cluster.store.get(cluster.key)) == template_of(written)
    if case.gone:
        assert cluster.store.get(cluster.key) is None


def check_requests(case: Case, requests: list) -> None:
    """After the install: reinvocation never patches, nothing but the expected step is
    refused, and what a controller owns (ReplicaSets, Jobs) is never patched."""
    expected_refusal = case.outcome not in ("unpatched", "patched", "not sent")
    refused = [r for r in requests if r.result is not None and not r.result.allowed]
    assert len(refused) == (1 if expected_refusal else 0), [r.result.message for r in refused]
    for request in requests:
        result = request.result
        if not reviewed(result):
            continue
        assert [c.patch for c in result.calls if c.reinvocation] in ([None], [])
        if request.key[1] in ("ReplicaSet", "Job"):
            assert mutate_patches(result) == [None], request
    scaled = [r for r in requests if r.key[1] == "ReplicaSet" and r.operation == "UPDATE"]
    assert len(scaled) == case.scaled and all(reviewed(r.result) for r in scaled)


def check_stored(store: Store) -> None:
    """Every object the store holds is one the apiserver would hold."""
    for key, obj in store.objects.items():
        assert validate(obj) == [], key
        assert schema_error(obj)[0] is None, key


def on_class(spec: dict, annotations: dict, gib: int) -> None:
    """The pod spec asks one GPU on exactly the class for `gib`, no memory and no stale selector."""
    profile, selector = CLASSES[gib]
    assert spec["nodeSelector"] == {SELECTOR: selector}
    assert annotations[PROFILE] == profile
    assert MEM not in json.dumps(spec)
    assert spec["containers"][0]["resources"]["limits"][GPU] == "1"


def check_classes(case: Case, cluster: Cluster, written: dict, start: int) -> None:
    """The template and the pods created since the install are on the case's classes."""
    stored = cluster.store.get(cluster.key)
    if case.gone:
        return
    template = template_of(stored)
    if case.template is None:
        assert template["spec"] == template_of(written)["spec"]
        assert PROFILE not in (template["metadata"].get("annotations") or {})
    else:
        on_class(template["spec"], template["metadata"]["annotations"], case.template)
    created = {
        r.key
        for r in cluster.store.requests[start:]
        if r.operation == "CREATE" and r.key[1] == "Pod"
    }
    pods = [
        p
        for p in cluster.store.of_kind("", "Pod", NS)
        if (p["apiVersion"], p["kind"], NS, p["metadata"]["name"])
    ]
    pods = [cluster.store.get(key) for key in created if cluster.store.get(key)]
    assert bool(pods) is (case.pods is not None)
    for made in pods:
        on_class(made["spec"], made["metadata"]["annotations"], case.pods)
        assert made["spec"]["containers"][0]["resources"]["requests"][GPU] == "1"  # defaulted
