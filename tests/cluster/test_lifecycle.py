"""Workloads over their life, through the install, on the real control plane: kube-apiserver
calling lwgpu's webhook pods through their Service, kube-controller-manager's Deployment,
ReplicaSet, StatefulSet, Job and garbage-collector controllers, kube-scheduler binding pods to
the mixed fleet, and the built kubectl sending what users send.

The Deployments, StatefulSets, Jobs and CronJobs of tests/cluster/lifecycle_cases.py are created
BEFORE the install, once for the module: lwgpu's two webhook configurations are deleted, the
workloads applied (client-side or server-side), their controllers make their ReplicaSets and
pods unreviewed, and the saved configurations are created again, which is what installing
lwgpu after them is. Then each case runs what users and controllers do next and checks: the
last step's outcome (lwgpu's warning, none, or the apiserver's refusal), that lwgpu refused
nothing (its own metrics), that no controller met an error (Warning events), no ReplicaSet
churn, the stored template's class, and that the pods created after the install carry the
class the decision chose (nodeSelector and `lwgpu.io/profile`, nothing stale) and are bound by
kube-scheduler to a node of that class, or stay Pending for want of an `nvidia.com/gpu` there.

A second mutating webhook (tests/cluster/second_webhook.py), called after lwgpu's, adds
`nvidia.com/gpumem: 4096` to containers asking `nvidia.com/gpu`, as HAMi's defaulting does;
the apiserver then calls lwgpu again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.cluster.lifecycle_cases import (
    CASES,
    NAME,
    NEW_IMAGE,
    RUN,
    SECOND,
    SET_IMAGE,
    Case,
    manifest,
    template_of,
)
from tests.cluster.workload_state import (
    current_pods,
    placed,
    pods_of,
    read,
    run_step,
    settled,
    unschedulable,
    workload_path,
)
from tests.support.builders import gpu_mem, pod
from tests.support.cluster import Namespace
from tools.cluster.controlplane import ControlPlane
from tools.cluster.install import Installation
from tools.waiting import wait_for

MEM, GPU, PROFILE = "aliyun.accelerator/nvidia_mem", "nvidia.com/gpu", "lwgpu.io/profile"
ASKS = ("aliyun.com/gpu-mem", "nvidia.com/gpumem")  # what a rewritten pod no longer asks
CLASSES = {1: "1024MiB", 2: "2048MiB", 4: "4096MiB", 8: "8192MiB"}
GIB = {selector: gib for gib, selector in CLASSES.items()}
# What an uninstall takes away from the apiserver: the webhook and the final-state check.
CONFIGS = (
    "mutatingwebhookconfiguration/lwgpu-mutate",
    "validatingadmissionpolicy/lwgpu-final-state",
    "validatingadmissionpolicybinding/lwgpu-final-state",
)
WAIT_S = 60
# Warning events that are no controller's error: a Pending pod (the scheduler), and a Job the
# CronJob controller did not schedule itself (`kubectl create job --from`;
# pkg/controller/cronjob/cronjob_controllerv2.go `syncCronJob`).
EXPECTED_WARNINGS = ("FailedScheduling", "UnexpectedJob")
TAG = "lwgpu-test/lifecycle"


def class_of(plane: ControlPlane, namespace: str, obj: dict) -> str | None:
    """The class selector the apiserver gives `obj` now, by a server-side dry run through the
    webhooks (None: left asking GPU memory)."""
    args = ("-n", namespace, "create", "--dry-run=server", "-o", "json", "-f", "-")
    stored = json.loads(plane.kubectl(*args, input=json.dumps(obj)).stdout)
    return (stored["spec"].get("nodeSelector") or {}).get(MEM)


def unchecked(plane: ControlPlane, namespace: str, obj: dict) -> bool:
    """A server-side dry run of `obj` meets neither the webhook nor the final-state check: it
    is created as sent (the apiserver drops each from its informer a moment apart)."""
    args = ("-n", namespace, "create", "--dry-run=server", "-o", "json", "-f", "-")
    done = plane.kubectl(*args, input=json.dumps(obj), check=False)
    if done.returncode:
        return False
    return MEM not in (json.loads(done.stdout)["spec"].get("nodeSelector") or {})


# The install, after the workloads ---------------------------------------------------------


@contextlib.contextmanager
def uninstalled(plane: ControlPlane, namespace: str) -> Iterator[None]:
    """lwgpu's webhook configuration and final-state check deleted for the block, then created
    again as they were: caBundle included, and their field owners (kubectl's server-side
    apply, the certificate Job's patch, the policy-sync sidecar's apply), which a create
    replaces with its own and a patch of managedFields restores, so a later `kubectl apply
    --server-side` of deploy/ meets the same object. The apiserver sees configurations through
    an informer: each change is awaited by a dry run that lwgpu rewrites or not."""
    probe = pod(gpu_mem(2))
    saved = {
        c: json.loads(plane.kubectl("get", c, "-o", "json", "--show-managed-fields").stdout)
        for c in CONFIGS
    }
    plane.kubectl("delete", *CONFIGS)
    try:
        wait_for(
            lambda: unchecked(plane, namespace, probe),
            WAIT_S,
            what="the apiserver to stop calling lwgpu and checking for it",
        )
        yield
    finally:
        for config, obj in saved.items():
            meta = obj["metadata"]
            for key in ("resourceVersion", "uid", "creationTimestamp", "generation"):
                meta.pop(key, None)
            plane.kubectl("create", "-f", "-", input=json.dumps(obj))
            owners = {"metadata": {"managedFields": meta["managedFields"]}}
            plane.kubectl("patch", config, "--type=merge", "-p", json.dumps(owners))
        wait_for(
            lambda: class_of(plane, namespace, probe) == CLASSES[2],
            WAIT_S,
            what="the apiserver to call lwgpu again",
        )


@dataclass
class Before:
    """What the install found: each case's namespace, its workload as stored, and the pods its
    controller had made (by uid)."""

    namespaces: dict[str, str]
    stored: dict[str, dict]
    pods: dict[str, dict[str, dict]]


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace"}


def as_list(items: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def children_made(plane: ControlPlane, namespaces: dict[str, str]) -> bool:
    """Every workload's controller made its first pod (a suspended CronJob makes none)."""
    made = Counter(p["metadata"]["namespace"] for p in read(plane, "/api/v1/pods")["items"])
    return all(made[ns] >= (CASES[c].kind != "CronJob") for c, ns in namespaces.items())


@pytest.fixture(scope="module")
def before(control_plane: ControlPlane, lwgpu: Installation) -> Iterator[Before]:
    """Every case's workload created before the install, in a namespace of its own."""
    plane, tag = control_plane, f"life-{os.getpid()}"
    names = {case: f"{tag}-{i}" for i, case in enumerate(CASES)}
    labelled = [{"metadata": {"name": n, "labels": {TAG: tag}}} for n in names.values()]
    plane.kubectl("create", "-f", "-", input=as_list([{**NAMESPACE, **n} for n in labelled]))
    try:
        early = {c: n for c, n in names.items() if CASES[c].created != "after"}
        files = {
            how: [
                manifest(CASES[c].kind, n, second=CASES[c].second, finalizer=CASES[c].finalizer)
                for c, n in early.items()
                if CASES[c].created == how
            ]
            for how in ("apply", "apply --server-side")
        }
        with uninstalled(plane, next(iter(names.values()))):
            plane.kubectl("apply", "-f", "-", input=as_list(files["apply"]))
            plane.kubectl(
                "apply", "--server-side", "-f", "-", input=as_list(files["apply --server-side"])
            )
            wait_for(lambda: children_made(plane, early), WAIT_S, what="the pre-install pods")
            stored = {c: read(plane, workload_path(CASES[c].kind, n)) for c, n in early.items()}
            pods = {
                c: {p["metadata"]["uid"]: p for p in pods_of(plane, n)} for c, n in early.items()
            }
        yield Before(names, stored, pods)
    finally:
        plane.kubectl("delete", "namespace", "-l", f"{TAG}={tag}", "--wait=false")


def remove(namespace: Namespace) -> None:
    """As the shared `namespace` fixture ends: the namespace deleted, its pods at once."""
    plane = namespace.plane
    plane.kubectl("delete", "namespace", namespace.name, "--wait=false")
    plane.kubectl(
        "delete", "pods", "--all", "-n", namespace.name, "--force", "--grace-period=0", check=False
    )


# What lwgpu and the controllers did -------------------------------------------------------


def reviews(installation: Installation) -> Counter:
    """lwgpu's reviews by (endpoint, decision), and its HTTP errors as (endpoint, "error"),
    summed over the webhook pods' /metrics."""
    total: Counter = Counter()
    for running in installation.webhook:
        for sample in installation.samples(running):
            if sample.name == "lwgpu_admission_reviews_total":
                total[sample.labels["endpoint"], sample.labels["decision"]] += sample.value
            elif sample.name == "lwgpu_admission_request_errors_total":
                total[sample.labels["endpoint"], "error"] += sample.value
    return total


def on_class(found: dict, gib: int, where: str) -> None:
    """A pod spec (with its metadata) asks one GPU on exactly the class for `gib`: selector and
    profile, and no memory request left (nothing stale)."""
    spec, annotations = found["spec"], found["metadata"].get("annotations") or {}
    assert spec.get("nodeSelector") == {MEM: CLASSES[gib]}, where
    assert annotations.get(PROFILE) == f"GRID-P4-{gib}Q", where
    assert not any(ask in json.dumps(spec) for ask in ASKS), where
    for container in spec["containers"]:
        assert container["resources"]["limits"] == {GPU: "1"}, where


# The cases ------------------------------------------------------------------------------


def test_workloads_made_before_the_install_have_unreviewed_pods_pending(before, control_plane):
    """The problem lwgpu solves, found by the install: the pods made before it ask GPU memory,
    which no node offers, so kube-scheduler leaves them Pending."""
    early = [(before.namespaces[c], p) for c, pods in before.pods.items() for p in pods.values()]
    assert len(early) == sum(CASES[c].kind != "CronJob" for c in before.pods)
    for _, found in early:
        assert PROFILE not in (found["metadata"].get("annotations") or {})
        assert found["spec"]["containers"][0]["resources"]["limits"] == {ASKS[0]: "2"}
    namespace, found = early[0]
    path = f"/api/v1/namespaces/{namespace}/pods/{found['metadata']['name']}"
    reason = wait_for(
        lambda: unschedulable(read(control_plane, path)), WAIT_S, what="the scheduler"
    )
    assert f"Insufficient {ASKS[0]}" in reason


@pytest.mark.parametrize("name", list(CASES))
def test_lifecycle(name, before, control_plane, lwgpu, request):
    """The case's steps after the install, and how they end (module docstring)."""
    case, plane = CASES[name], control_plane
    namespace = Namespace(before.namespaces[name], plane)
    with contextlib.ExitStack() as stack:
        stack.callback(remove, namespace)
        if case.second:
            second = request.getfixturevalue("second_webhook")
            probe = pod(gpu_mem(2))
            probe["metadata"]["labels"] = dict(SECOND)
            ready = lambda: class_of(plane, namespace.name, probe) == CLASSES[4]  # noqa: E731
            stack.enter_context(second.registered(plane, [namespace.name], ready))
        if case.created == "after":
            made = namespace.kubectl(
                "apply", "-f", "-", input=json.dumps(manifest(case.kind, namespace.name))
            )
            assert "Warning: lwgpu:" in made.stderr
            wait_for(lambda: settled(case, plane, namespace.name), WAIT_S, what="the first rollout")
        written = read(plane, workload_path(case.kind, namespace.name))
        old = set(before.pods.get(name, {}))
        counts = reviews(lwgpu)

        for step in case.steps:
            done = run_step(plane, namespace.name, case, step)
            if step is not case.steps[-1]:
                assert done.returncode == 0, (step.words, done.stderr)
            if step.until_gone:
                wait_for(
                    lambda: read(plane, workload_path(case.kind, namespace.name)) is None,
                    WAIT_S,
                    what=f"{case.kind} gone",
                )

        check_outcome(case, done)
        wait_for(
            lambda: settled(case, plane, namespace.name), WAIT_S, what=f"{name}: the controllers"
        )
        (new,) = wait_for(
            lambda: placed(plane, namespace.name, old, case.pending),
            WAIT_S,
            what=f"{name}: the scheduler",
        )
        stored = read(plane, workload_path(case.kind, namespace.name))
        check_template(case, plane, namespace.name, written, stored)
        check_pods(case, plane, namespace.name, stored, new)
        if case.kind == "Deployment":
            sets = read(plane, f"/apis/apps/v1/namespaces/{namespace.name}/replicasets")["items"]
            assert len(sets) == case.replica_sets, [s["metadata"]["name"] for s in sets]
        changed = reviews(lwgpu) - counts
        assert changed["mutate", "denied"] == changed["validate", "denied"] == 0, changed
        assert changed["mutate", "error"] == changed["validate", "error"] == 0, changed
        if case.second:
            assert any(patched for _, _, patched in second.calls), second.calls
        events = read(plane, f"/api/v1/namespaces/{namespace.name}/events")["items"]
        warnings = [
            (e["reason"], e["message"])
            for e in events
            if e["type"] == "Warning" and e["reason"] not in EXPECTED_WARNINGS
        ]
        assert warnings == []


def check_outcome(case: Case, done: subprocess.CompletedProcess[str]) -> None:
    """The last step was rewritten or not, or refused by the apiserver as the case says."""
    warnings = [line for line in done.stderr.splitlines() if line.startswith("Warning: lwgpu:")]
    if case.outcome in ("patched", "unpatched"):
        assert done.returncode == 0, done.stderr
        assert bool(warnings) is (case.outcome == "patched"), done.stderr
    else:  # the apiserver's validation; lwgpu neither caused nor hid it
        assert done.returncode == 1 and warnings == [], done.stderr
        # kubectl apply words the apiserver's Invalid status as "The Job ...", the patch
        # commands quote its message ("Job.batch ...").
        assert re.search(f'(The Job|Job.batch) "{NAME}" is invalid: spec.template', done.stderr)
        assert case.outcome in done.stderr


def check_template(
    case: Case, plane: ControlPlane, namespace: str, written: dict | None, stored: dict | None
) -> None:
    """The stored template is as written before the install, or on the case's class; what
    the user changed is kept; a CronJob's run is left as its jobTemplate (its pods are decided
    at Pod CREATE)."""
    if case.gone:
        assert stored is None
        return
    template = template_of(stored)
    if case.template is None:
        assert template == template_of(written)
        assert PROFILE not in (template["metadata"].get("annotations") or {})
    else:
        on_class(template, case.template, "template")
    if SET_IMAGE in case.steps and case.outcome in ("patched", "unpatched"):
        assert template["spec"]["containers"][0]["image"] == NEW_IMAGE
    if RUN in case.steps:
        run = read(plane, f"/apis/batch/v1/namespaces/{namespace}/jobs/gpu-run")
        assert run["spec"]["template"]["spec"] == template["spec"]


def check_pods(
    case: Case, plane: ControlPlane, namespace: str, stored: dict | None, new: list[dict]
) -> None:
    """Every pod created after the install is on a class and bound to a node of it, or
    Pending for want of an nvidia.com/gpu there; the current revision's are on the case's."""
    nodes = {
        n["metadata"]["name"]: n["metadata"]["labels"]
        for n in read(plane, "/api/v1/nodes")["items"]
    }
    pending = 0
    for found in new:
        where = found["metadata"]["name"]
        gib = GIB.get((found["spec"].get("nodeSelector") or {}).get(MEM))
        assert gib is not None, (where, found["spec"])
        on_class(found, gib, where)
        bound = found["spec"].get("nodeName")
        if bound:
            assert nodes[bound][MEM] == CLASSES[gib], (where, bound)
        else:
            assert f"Insufficient {GPU}" in unschedulable(found), (where, unschedulable(found))
            pending += 1
    assert pending == case.pending
    uids = {p["metadata"]["uid"] for p in new}
    current = [
        p for p in current_pods(case, plane, namespace, stored) if p["metadata"]["uid"] in uids
    ]
    classes = sorted(GIB[p["spec"]["nodeSelector"][MEM]] for p in current)
    assert classes == sorted(case.pods), [p["metadata"]["name"] for p in current]
