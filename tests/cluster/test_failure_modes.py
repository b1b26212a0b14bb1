"""The failure-mode table: with the webhook stopped, what kubectl prints for each kind of
object, in the arrangement lwgpu shipped before (`lwgpu-mutate` failing closed, no final-state
check) and in the one it ships (failing open, with the check in the apiserver).

The table is written to tests/golden/cluster/failure-modes.md, which docs/OPERATIONS.md
quotes; the outcomes are also asserted here, so a regenerated table cannot hide a regression.
Each object is sent three ways, `kubectl create`, `create --dry-run=server` and `apply
--dry-run=server`, which must answer alike. Stopping the webhook stops its whole pod (the
policy-sync sidecar too), as when its node dies; the old arrangement is made by patching the
installed webhook to Fail and deleting the check's binding, both put back before the shipped
arrangement is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager

import yaml

from tests.cluster.admission_support import module_namespace
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.cluster import Namespace
from tests.support.golden import check_golden
from tests.support.paths import DEPLOY, GOLDEN
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for
from webhook.compile.final_state import NAME

TABLE = GOLDEN / "cluster" / "failure-modes.md"
SEED_SELECTOR = {"aliyun.accelerator/nvidia_mem": "2048MiB"}
DEPLOYMENT = workload("apps/v1", "Deployment", pod(gpu_mem(2)), name="memory")
DEPLOYMENT["spec"]["template"]["metadata"] = {"labels": {"app": "memory"}}
# Names of their own: one namespace holds those created.
OBJECTS = {
    "GPU-memory pod (`aliyun.com/gpu-mem: 2`)": pod(gpu_mem(2), name="memory"),
    "GPU-memory Deployment": DEPLOYMENT,
    "whole-GPU pod (`nvidia.com/gpu: 2`)": pod(
        container(limits={"nvidia.com/gpu": "2"}), name="whole"
    ),
    "pod in the seed's lightweight form (`nvidia.com/gpu: 1` + class selector)": pod(
        container(limits={"nvidia.com/gpu": "1"}), node_selector=SEED_SELECTOR, name="seed"
    ),
    "pod with no GPU": pod(container(limits={"cpu": "1"}), name="cpu"),
}
WEBHOOK_DOWN = 'failed calling webhook "mutate.lwgpu.io"'
CHECKED = f"ValidatingAdmissionPolicy '{NAME}' with binding '{NAME}' denied request"
# Which objects each arrangement refuses, and with what (the rest are created).
REFUSED = {
    "before": dict.fromkeys(list(OBJECTS)[:4], WEBHOOK_DOWN),
    "shipped": dict.fromkeys(list(OBJECTS)[:2], CHECKED),
}
MUTATE = ("mutatingwebhookconfiguration", "lwgpu-mutate")
[SHIPPED_BINDING] = [
    doc
    for doc in yaml.safe_load_all((DEPLOY / "base" / "final-state.yaml").read_text())
    if doc and doc["kind"] == "ValidatingAdmissionPolicyBinding"
]


def _failure_policy(plane: ControlPlane, value: str) -> None:
    patch = [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": value}]
    plane.kubectl("patch", *MUTATE, "--type=json", "-p", json.dumps(patch))


def _probe(plane: ControlPlane) -> str:
    """What the apiserver answers a GPU-memory pod now (a dry run in `default`)."""
    done = plane.kubectl(
        "create", "-n", "default", "--dry-run=server", "-f", "-",
        input=json.dumps(pod(gpu_mem(2))), check=False,
    )  # fmt: skip
    return done.stderr


@contextmanager
def fail_closed_without_check(plane: ControlPlane) -> Iterator[None]:
    """The arrangement before the final-state check; the shipped one again at the end."""
    _failure_policy(plane, "Fail")
    plane.kubectl("delete", "validatingadmissionpolicybinding", NAME)
    try:
        # the apiserver takes both changes from its informers, a moment later
        wait_for(lambda: WEBHOOK_DOWN in _probe(plane), timeout=30, what="the old arrangement")
        yield
    finally:
        _failure_policy(plane, "Ignore")
        plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(SHIPPED_BINDING))
        wait_for(lambda: CHECKED in _probe(plane), timeout=30, what="the shipped arrangement")


def _shown(done) -> str:
    """What kubectl printed, the same for a dry run: the pod's address, which differs from
    run to run, and the dry run's own mark are taken out."""
    text = (done.stdout + done.stderr).strip().replace(" (server dry run)", "")
    return re.sub(r"dial tcp [0-9.]+:", "dial tcp <pod address>:", text)


def answers(namespace: Namespace) -> dict[str, str]:
    """What kubectl prints for each object, asserted alike for the three ways of sending."""
    found = {}
    for name, obj in OBJECTS.items():
        sent = [
            namespace.kubectl(*how, "-f", "-", input=json.dumps(obj), check=False)
            for how in (("create", "--dry-run=server"), ("apply", "--dry-run=server"), ("create",))
        ]
        shown = [_shown(done) for done in sent]
        assert shown == [shown[2]] * 3, shown
        assert len({done.returncode for done in sent}) == 1, shown
        found[name] = ("refused: " if sent[2].returncode else "created: ") + shown[2]
    return found


def table(before: dict[str, str], shipped: dict[str, str]) -> str:
    rows = [
        "<!-- Written by tests/cluster/test_failure_modes.py (LWGPU_UPDATE_GOLDEN=1): the",
        "webhook stopped, each object sent with kubectl create; create --dry-run=server and",
        "apply --dry-run=server print the same. -->",
        "| webhook stopped | before: `failurePolicy: Fail`, no final-state check"
        " | shipped: `failurePolicy: Ignore` + ValidatingAdmissionPolicy `lwgpu-final-state` |",
        "|---|---|---|",
    ]
    for name in OBJECTS:
        cells = [f"{outcome}`".replace(": ", ": `", 1) for outcome in (before[name], shipped[name])]
        rows.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows) + "\n"


def test_the_failure_mode_table_before_and_after(lwgpu, namespace):
    plane = lwgpu.plane
    lwgpu.stop_webhook()
    try:
        with fail_closed_without_check(plane), module_namespace(plane, "before") as other:
            before = answers(other)
        shipped = answers(namespace)
    finally:
        lwgpu.start_webhook()

    for arrangement, found in (("before", before), ("shipped", shipped)):
        refused = {
            name: next(m for m in (WEBHOOK_DOWN, CHECKED) if m in shown)
            for name, shown in found.items()
            if shown.startswith("refused")
        }
        assert refused == REFUSED[arrangement], found
    check_golden(TABLE, table(before, shipped))
