"""lwgpu's audit annotations in the real apiserver's audit log.

tools/cluster/controlplane.py starts kube-apiserver with `--audit-policy-file` (pod creations
at Metadata level) and `--audit-log-path`. Each key of an answer's `auditAnnotations` is
recorded as `<webhook name>/<key>` (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/
mutating/dispatcher.go and validating/dispatcher.go, `callHook`) in the event's `annotations`
(staging/src/k8s.io/apiserver/pkg/admission/audit.go, `logAnnotations`). The test adds the
validating webhook (the optional deploy/components/validating-webhook) for its own namespace
only, so both endpoints answer each pod and both prefixes show.
"""

from __future__ import annotations

import json

from tests.cluster.admission_support import (
    MUTATE,
    VALIDATE,
    installed_webhook,
    webhook_configuration,
)
from tests.support.builders import gpu_mem, pod
from tools.waiting import wait_for

LWGPU = (f"{MUTATE}/", f"{VALIDATE}/")


def audited(plane, namespace: str, name: str) -> dict | None:
    """The lwgpu annotations of the audit event of the pod's creation, once it is logged."""
    for line in plane.audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef", {})
        if (ref.get("namespace"), ref.get("name"), event["verb"]) == (namespace, name, "create"):
            notes = event.get("annotations", {})
            return {k: v for k, v in notes.items() if k.startswith(LWGPU)} | {
                "code": event["responseStatus"]["code"]
            }
    return None


def test_the_audit_log_records_why_a_pod_was_rewritten_or_refused(lwgpu, namespace):
    plane = lwgpu.plane
    mutating = installed_webhook(plane, "mutatingwebhookconfiguration", "lwgpu-mutate")
    validating = {
        key: mutating[key]
        for key in ("admissionReviewVersions", "sideEffects", "timeoutSeconds", "rules")
    }
    validating |= {
        "name": VALIDATE,
        "failurePolicy": "Fail",
        "clientConfig": {
            **mutating["clientConfig"],
            "service": {**mutating["clientConfig"]["service"], "path": "/validate"},
        },
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace.name}},
    }
    with webhook_configuration(
        plane, "ValidatingWebhookConfiguration", "lwgpu-test-audit", validating
    ):
        namespace.kubectl("create", "-f", "-", input=json.dumps(pod(gpu_mem(2), name="fits")))
        refused = namespace.kubectl(
            "create", "-f", "-", input=json.dumps(pod(gpu_mem(64), name="too-big")), check=False
        )
    assert refused.returncode == 1 and "denied the request" in refused.stderr

    rewritten = wait_for(lambda: audited(plane, namespace.name, "fits"), timeout=30)
    denied = wait_for(lambda: audited(plane, namespace.name, "too-big"), timeout=30)

    # The validating webhook sees the rewritten pod: allowed, in the lightweight form.
    assert rewritten == {
        "mutate.lwgpu.io/decision": "mutated",
        "mutate.lwgpu.io/class": "GRID-P4-2Q",
        "mutate.lwgpu.io/policy": "default",
        "mutate.lwgpu.io/asked": "aliyun.com/gpu-mem=2",
        "validate.lwgpu.io/decision": "allowed",
        "validate.lwgpu.io/class": "GRID-P4-2Q",
        "validate.lwgpu.io/policy": "default",
        "validate.lwgpu.io/asked": "nvidia.com/gpu=1",
        "code": 201,
    }
    # Refused by the mutating webhook: the validating one is never called.
    assert denied == {
        "mutate.lwgpu.io/decision": "denied",
        "mutate.lwgpu.io/policy": "default",
        "mutate.lwgpu.io/asked": "aliyun.com/gpu-mem=64",
        "code": 403,
    }
