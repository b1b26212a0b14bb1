"""`mode: audit` on the real control plane: a namespace whose policy only audits, beside one
the shipped policy governs, with the policies rolled out through the webhook's ConfigMap as
admins roll them out.

In the audited namespace a pod the shipped policy would rewrite is stored as sent, and one it
would refuse is admitted; kubectl prints lwgpu's `(audit)` warnings, and the apiserver's audit
log records `would-mutate` and `would-deny` (`<webhook name>/decision`: staging/src/k8s.io/
apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go, `callAttrMutatingHook`, adds
each of the answer's `auditAnnotations`). The final-state ValidatingAdmissionPolicy that the
policy-sync sidecar compiles from the served policies leaves the audited namespace alone and
still refuses elsewhere while the webhook is down; the compiled MutatingAdmissionPolicy leaves
the audited namespace's objects as the webhook leaves them (tests/cluster/rewrite_sides.py).
A policy's `matchConditions` all must hold for it to evaluate at all
(staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_dispatcher.go,
`Dispatch`: a condition that is false skips the binding), which is where `mode` is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.admission_support import module_namespace
from tests.cluster.rewrite_sides import APISERVER, LABEL, dry_create, installed, loaded, sides
from tests.cluster.test_audit_annotations import audited
from tests.cluster.test_final_state import DENIED
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.cluster import Namespace
from tests.support.paths import REPO, SHIPPED_POLICY
from tools.waiting import wait_for
from webhook.compile.final_state import NAME

SHIPPED = SHIPPED_POLICY.read_text()
# The shipped policy's classes, auditing the namespaces named audit-*: more specific than its
# `*`, so it governs them and the shipped policy every other namespace.
AUDIT = (
    SHIPPED.replace("name: default", "name: trial", 1).replace(
        'include: ["*"]', 'include: ["audit-*"]', 1
    )
    + "  mode: audit\n"
)
SERVED = {"default.yaml": SHIPPED, "trial.yaml": AUDIT}
WOULD_REWRITE = (
    "Warning: lwgpu (audit): would rewrite aliyun.com/gpu-mem=2 -> nvidia.com/gpu=1 on GRID-P4-2Q"
)
WOULD_REFUSE = (
    "Warning: lwgpu (audit): would refuse: spec.containers[0].resources: containers[0] (cuda) "
    "asks aliyun.com/gpu-mem=64 (65536Mi),"
)


@dataclass(frozen=True)
class Rollout:
    """The namespace the trial policy audits and one the shipped policy enforces."""

    audited: Namespace
    enforced: Namespace


def compiled_check(tmp: Path) -> dict:
    """`lwgpu policy compile --only check` of the served files: what the sidecar applies."""
    for name, text in SERVED.items():
        (tmp / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "policy", "compile", "--only", "check", "-o", "json"]
        + [str(tmp / name) for name in sorted(SERVED)],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    check: dict = json.loads(done.stdout)["items"][0]
    return check


def installed_check(lwgpu) -> dict:
    stored = lwgpu.plane.kubectl("get", "validatingadmissionpolicy", NAME, "-o", "json").stdout
    check: dict = json.loads(stored)
    return check


def reviews(lwgpu, decision: str) -> float:
    """The webhook pods' count of /mutate answers with `decision`, from their /metrics."""
    return sum(
        s.value
        for pod in lwgpu.webhook
        for s in lwgpu.samples(pod)
        if s.name == "lwgpu_admission_reviews_total"
        and s.labels == {"endpoint": "mutate", "decision": decision}
    )


def create(namespace: Namespace, obj: dict, *how: str) -> subprocess.CompletedProcess[str]:
    return namespace.kubectl("create", *how, "-f", "-", input=json.dumps(obj), check=False)


@pytest.fixture(scope="module")
def rollout(lwgpu, tmp_path_factory) -> Iterator[Rollout]:
    """The trial policy rolled out beside the shipped one; awaited until the sidecar applied
    its check and the apiserver evaluates it. Rolled back at the end, awaited alike."""
    plane = lwgpu.plane
    wanted = compiled_check(tmp_path_factory.mktemp("audit-policies"))["spec"]
    assert "enforced-namespace" in json.dumps(wanted["matchConditions"])
    with (
        module_namespace(plane, "audit-") as audited_ns,
        module_namespace(plane, "enforced-") as enforced_ns,
    ):
        lwgpu.set_policies(SERVED)
        try:
            wait_for(
                lambda: (
                    installed_check(lwgpu)["spec"]["matchConditions"] == wanted["matchConditions"]
                ),
                timeout=30,
                what="the sidecar to apply the check of the audited policies",
            )
            # The apiserver takes a changed policy up from its informer, a moment later.
            probe = pod(gpu_mem(2))
            wait_for(
                lambda: create(audited_ns, probe, "--dry-run=server").returncode == 0,
                timeout=30,
                what="the apiserver to leave the audited namespace to the webhook",
            )
            yield Rollout(audited_ns, enforced_ns)
        finally:
            lwgpu.set_policies({"default.yaml": SHIPPED})
            wait_for(
                lambda: "enforced-namespace" not in json.dumps(installed_check(lwgpu)["spec"]),
                timeout=30,
                what="the shipped policy's check back",
            )


def test_a_pod_enforce_would_rewrite_is_stored_as_sent(lwgpu, rollout):
    sent = pod(gpu_mem(2), name="would-rewrite")
    counted = reviews(lwgpu, "would-mutate"), reviews(lwgpu, "mutated")
    done = create(rollout.audited, sent)
    assert done.returncode == 0, done.stderr
    assert WOULD_REWRITE in done.stderr.splitlines()
    # Counted apart from what was rewritten.
    assert (reviews(lwgpu, "would-mutate"), reviews(lwgpu, "mutated")) == (
        counted[0] + 1,
        counted[1],
    )

    stored = rollout.audited.get("pod", "would-rewrite")
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"aliyun.com/gpu-mem": "2"}
    assert "nodeSelector" not in stored["spec"]
    assert not any(k.startswith("lwgpu.io/") for k in stored["metadata"].get("annotations", {}))
    logged = wait_for(lambda: audited(lwgpu.plane, rollout.audited.name, "would-rewrite"), 30)
    print(f"audit log, pod would-rewrite: {logged}")
    assert logged == {
        "mutate.lwgpu.io/decision": "would-mutate",
        "mutate.lwgpu.io/class": "GRID-P4-2Q",
        "mutate.lwgpu.io/policy": "trial",
        "mutate.lwgpu.io/asked": "aliyun.com/gpu-mem=2",
        "code": 201,
    }
    # The shipped policy still rewrites beside it.
    beside = create(rollout.enforced, sent, "--dry-run=server", "-o", "json")
    assert json.loads(beside.stdout)["spec"]["nodeSelector"] == {
        "aliyun.accelerator/nvidia_mem": "2048MiB"
    }


def test_a_pod_enforce_would_refuse_is_admitted_with_the_refusal(lwgpu, rollout):
    sent = pod(gpu_mem(64), name="would-refuse")
    counted = reviews(lwgpu, "would-deny"), reviews(lwgpu, "denied")
    done = create(rollout.audited, sent)
    assert done.returncode == 0, done.stderr
    assert (reviews(lwgpu, "would-deny"), reviews(lwgpu, "denied")) == (counted[0] + 1, counted[1])
    warnings = [line for line in done.stderr.splitlines() if "lwgpu (audit)" in line]
    assert warnings[0] == WOULD_REFUSE
    assert warnings[-1] == "Warning: lwgpu (audit): aliyun.com/gpu-mem: 8 (units of 1Gi)"
    logged = wait_for(lambda: audited(lwgpu.plane, rollout.audited.name, "would-refuse"), 30)
    print(f"audit log, pod would-refuse: {logged}")
    assert logged == {
        "mutate.lwgpu.io/decision": "would-deny",
        "mutate.lwgpu.io/policy": "trial",
        "mutate.lwgpu.io/asked": "aliyun.com/gpu-mem=64",
        "code": 201,
    }
    refused = create(rollout.enforced, sent, "--dry-run=server")
    assert refused.returncode == 1
    assert 'admission webhook "mutate.lwgpu.io" denied the request' in refused.stderr


def test_the_final_state_check_spares_the_audited_namespace_only(lwgpu, rollout):
    """With the webhook down (`failurePolicy: Ignore`) only the check decides: it refuses an
    unrewritten pod where the shipped policy enforces, and not where the trial one audits."""
    lwgpu.stop_webhook()
    try:
        probe = pod(gpu_mem(2))
        elsewhere = wait_for(
            lambda: (
                (done := create(rollout.enforced, probe, "--dry-run=server")).returncode and done
            ),
            timeout=30,
        )
        spared = create(rollout.audited, probe, "--dry-run=server")
    finally:
        lwgpu.start_webhook()
    assert DENIED in elsewhere.stderr
    assert spared.returncode == 0, spared.stderr


SENT = {
    "would rewrite": pod(gpu_mem(2)),
    "would refuse": pod(gpu_mem(64)),
    "bound to a node": pod(gpu_mem(2), nodeName="anywhere"),
    "two GPUs on a class": pod(
        container(limits={"nvidia.com/gpu": "2"}),
        node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"},
    ),
    "deployment": workload(
        "apps/v1",
        "Deployment",
        {"metadata": {"labels": {"app": "gpu"}}, "spec": pod(gpu_mem(4))["spec"]},
    ),
}


def test_the_compiled_rewrite_leaves_audited_objects_as_the_webhook_does(lwgpu, rollout):
    """The MutatingAdmissionPolicy and check compiled from the served policies, beside the
    webhook (tests/cluster/rewrite_sides.py): both sides of an audited pair store every object
    as sent, while the compiled rewrite is seen rewriting in an enforced namespace."""
    plane = lwgpu.plane
    with (
        installed(plane, loaded(SERVED)),
        sides(plane, f"audit-parity-{os.getpid()}") as audited_pair,
        module_namespace(plane, "enforced-parity-") as enforced_ns,
    ):
        plane.kubectl("label", "namespace", enforced_ns.name, f"{LABEL}={APISERVER}")
        probe = pod(gpu_mem(2))
        wait_for(
            lambda: (
                (dry_create(plane, enforced_ns.name, probe).stored or {})
                .get("spec", {})
                .get("nodeSelector")
            ),
            timeout=60,
            what="the compiled rewrite to be evaluated",
        )
        for case, obj in SENT.items():
            by_webhook = dry_create(plane, audited_pair.webhook, obj)
            by_apiserver = dry_create(plane, audited_pair.apiserver, obj)
            assert not by_webhook.refused and not by_apiserver.refused, case
            assert by_webhook.stored == by_apiserver.stored, case
            stored = by_apiserver.stored
            metadata = stored["spec"].get("template", stored)["metadata"]
            assert not any(k.startswith("lwgpu.io/") for k in metadata.get("annotations", {}))
