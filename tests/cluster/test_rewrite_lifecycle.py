"""Parity of the rewrite in the apiserver with the webhook over workloads' lives: cases of
tests/cluster/lifecycle_cases.py, run side by side in a namespace the installed webhook
decides and one only the compiled MutatingAdmissionPolicy and final-state check decide
(tests/cluster/rewrite_sides.py), on the real control plane with its controllers.

Each case's workload is created in both namespaces before either decides them (labelled
`none`, as before an install), its controller makes its pods unreviewed; then each namespace
goes to its side and the case's steps run in both. Every step must succeed or fail alike, and
once the controllers are quiet the two namespaces must hold the same objects: the workload,
its ReplicaSets and Jobs, and every pod (which node a pod is bound to is the scheduler's
choice among equal nodes, and is left aside, as are lwgpu's warnings).

Every case: scaling (kubectl and the scale subresource), labels, restarts, image changes,
client-side and server-side applies changing the ask, deletes held by a finalizer, an
orphaning delete, a Job's immutable template, a CronJob's manual run, and a second mutating
webhook (tests/cluster/second_webhook.py) registered for both namespaces, after lwgpu-mutate
on one side and after the compiled rewrite on the other, each reinvoked.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import time
from collections.abc import Iterator

import pytest

from tests.cluster.lifecycle_cases import CASES, NAME, SECOND, Case, manifest
from tests.cluster.rewrite_sides import (
    NEITHER,
    Sides,
    dry_create,
    installed,
    normal,
    placeholders,
    sides,
)
from tests.cluster.workload_state import run_step
from tests.support.builders import gpu_mem, pod
from tests.support.paths import SHIPPED_POLICY
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for
from webhook.files import load_policies

# What a namespace holds that admission decides or a controller makes from it.
MEM = "aliyun.accelerator/nvidia_mem"
HELD = ("deployments", "statefulsets", "jobs", "cronjobs", "replicasets", "pods")
QUIET_S = 4  # a snapshot unchanged this long: the controllers are done
WAIT_S = 90


def caught_up(item: dict) -> bool:
    """A controller has acted on the object's last change (workload_state.py `settled`)."""
    spec, status = item.get("spec") or {}, item.get("status") or {}
    if item["kind"] not in ("Deployment", "StatefulSet", "ReplicaSet"):
        return True
    done = status.get("observedGeneration") == item["metadata"].get("generation")
    wanted = spec.get("replicas", 1)
    if item["kind"] == "ReplicaSet":
        return done and status.get("replicas", 0) == wanted
    if item["kind"] == "Deployment":
        # without a kubelet no pod becomes available: the old ReplicaSet is never scaled down
        return done and status.get("updatedReplicas", 0) == wanted
    return done and status.get("updatedReplicas", 0) == status.get("replicas", 0) == wanted


def snapshot(plane: ControlPlane, namespace: str) -> tuple[dict[str, list], bool]:
    """Every object of HELD in `namespace`, normalized (rewrite_sides.normal) and sorted, and
    whether their controllers caught up. The kubelet's last step for a pod being deleted is
    done here (no kubelet runs): without it a StatefulSet never replaces a pod."""
    found = json.loads(plane.kubectl("get", ",".join(HELD), "-n", namespace, "-o", "json").stdout)[
        "items"
    ]
    # `rollout restart` stamps the template with the second it ran (restartedAt), and the
    # controllers name revisions by a hash of the template: the two sides restart in different
    # seconds as often as not, so the hashes are placeholders too (the times already are).
    hashes = {
        value
        for item in found
        for key, value in item["metadata"].get("labels", {}).items()
        if key in ("pod-template-hash", "controller-revision-hash")
    }
    by_kind: dict[str, list] = {}
    for item in found:
        meta = item["metadata"]
        if item["kind"] == "Pod" and meta.get("deletionTimestamp"):
            plane.kubectl(
                "delete", "pod", meta["name"], "-n", namespace, "--grace-period=0", "--force",
                check=False,
            )  # fmt: skip
        else:
            text = json.dumps(normal(item, namespace))
            for value in sorted(hashes, key=len, reverse=True):
                text = text.replace(value, "<hash>")
            by_kind.setdefault(item["kind"], []).append(json.loads(text))
    held = {kind: sorted(items, key=json.dumps) for kind, items in sorted(by_kind.items())}
    return held, all(map(caught_up, found))


def quiet(plane: ControlPlane, found: Sides) -> tuple[dict, dict]:
    """Both namespaces' snapshots once their controllers caught up and neither changed for
    QUIET_S seconds."""
    last: tuple[dict, dict] | None = None
    since = time.monotonic()

    def unchanged() -> tuple[dict, dict] | None:
        nonlocal last, since
        (by_webhook, done), (by_apiserver, also) = (
            snapshot(plane, found.webhook),
            snapshot(plane, found.apiserver),
        )
        now = (by_webhook, by_apiserver)
        if now != last or not (done and also):
            last, since = now, time.monotonic()
            return None
        return now if time.monotonic() - since >= QUIET_S else None

    return wait_for(unchanged, WAIT_S, interval=1, what="the controllers to be done")


@pytest.fixture(scope="module")
def before(lwgpu) -> Iterator[dict[str, Sides]]:
    """Each case's workload made in both its namespaces before either side decides them."""
    plane = lwgpu.plane
    with installed(plane, load_policies(SHIPPED_POLICY)), contextlib.ExitStack() as stack:
        pairs = {
            name: stack.enter_context(sides(plane, f"rl{i}-{os.getpid()}", label=NEITHER))
            for i, name in enumerate(CASES)
        }
        for name, pair in pairs.items():
            case = CASES[name]
            if case.created == "after":
                continue
            how = ["apply", "--server-side"] if case.created == "apply --server-side" else ["apply"]
            for namespace in (pair.webhook, pair.apiserver):
                made = manifest(case.kind, namespace, second=case.second, finalizer=case.finalizer)
                plane.kubectl("-n", namespace, *how, "-f", "-", input=json.dumps(made))
        yield pairs


@pytest.mark.parametrize("name", list(CASES))
def test_a_workload_lives_alike_on_both_sides(before, name, second_webhook):
    case, found = CASES[name], before[name]
    plane = found.plane
    if case.created != "after":
        # the controllers made the pods "before the install" (a suspended CronJob makes none)
        wait_for(
            lambda: case.kind == "CronJob" or snapshot(plane, found.webhook)[0].get("Pod"),
            WAIT_S,
            what="the pods made before the install",
        )
    found.label(None)
    found.await_sides()
    with contextlib.ExitStack() as stack:
        if case.second:
            stack.enter_context(
                second_webhook.registered(
                    plane, [found.webhook, found.apiserver], lambda: reinvoked(found)
                )
            )
        lives(found, case)


def reinvoked(found: Sides) -> bool:
    """The apiserver calls the second webhook on both sides, then lwgpu again: a pod it
    changes is given the class of its 4 GiB."""
    probe = pod(gpu_mem(2))
    probe["metadata"]["labels"] = dict(SECOND)
    classes = [
        (dry_create(found.plane, ns, probe).stored or {}).get("spec", {}).get("nodeSelector", {})
        for ns in (found.webhook, found.apiserver)
    ]
    return all(selector.get(MEM) == "4096MiB" for selector in classes)


def lives(found: Sides, case: Case) -> None:
    """The case's steps on both sides, alike, and both sides' objects alike at the end."""
    plane = found.plane
    if case.created == "after":
        for namespace in (found.webhook, found.apiserver):
            made = manifest(case.kind, namespace)
            plane.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(made))
    for step in case.steps:
        done = [run_step(plane, ns, case, step) for ns in (found.webhook, found.apiserver)]
        codes = [d.returncode for d in done]
        assert codes[0] == codes[1], (step.words, [d.stderr for d in done])
        if codes[0]:
            errors = [
                [placeholders(line, ns) for line in d.stderr.splitlines() if "Warning:" not in line]
                for d, ns in zip(done, (found.webhook, found.apiserver), strict=True)
            ]
            assert errors[0] == errors[1], step.words
        if step.until_gone:
            path = f"{case.kind.lower()}/{NAME}"
            for namespace in (found.webhook, found.apiserver):
                wait_for(
                    lambda namespace=namespace, path=path: (
                        plane.kubectl("-n", namespace, "get", path, check=False).returncode
                    ),
                    WAIT_S,
                    what=f"{case.kind} gone",
                )
    by_webhook, by_apiserver = quiet(plane, found)
    assert by_webhook == by_apiserver, differ(by_webhook, by_apiserver)


def differ(by_webhook: dict, by_apiserver: dict) -> str:
    """Where the two namespaces part, as a unified diff."""
    a, b = (
        json.dumps(s, indent=1, sort_keys=True).splitlines() for s in (by_webhook, by_apiserver)
    )
    return "\n".join(difflib.unified_diff(a, b, "webhook", "apiserver", lineterm="", n=3))
