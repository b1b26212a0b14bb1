"""The key-compromise runbook of docs/SECURITY.md, end to end on the real control plane: with
lwgpu installed from deploy/, delete both Secrets (the CA's and the serving one), run the
install again as the runbook says, and the webhook serves again under a new CA that the
apiserver trusts: a pod asking GPU memory is created through it, rewritten.

What kubelet does is done by tools/cluster/kubelet.py: it runs the Job's new pod, and, for the
webhook's pods, brings their Secret volume up to date as kubelet's periodic sync does (the
runbook's `kubectl rollout restart` only makes that sooner); the server reloads the
certificate from the volume.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
from datetime import UTC, datetime

from cryptography import x509

from certs.certset import signed_by_any
from certs.install import IN_FLIGHT
from tests.support.builders import pod
from tools.cluster.install import NAMESPACE, WEBHOOK_PORT, render, run_certificate_job
from tools.waiting import wait_for

MEM = "aliyun.accelerator/nvidia_mem"


def ca_bundle(lwgpu) -> list[x509.Certificate]:
    """lwgpu-mutate's caBundle: the CAs the apiserver trusts for the webhook."""
    config = lwgpu.plane.kubectl(
        "get", "mutatingwebhookconfiguration", "lwgpu-mutate", "-o", "json"
    )
    b64 = json.loads(config.stdout)["webhooks"][0]["clientConfig"]["caBundle"]
    return x509.load_pem_x509_certificates(base64.b64decode(b64))


def served(address: str) -> x509.Certificate:
    """The certificate a webhook pod presents now (unverified: the test checks it itself)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection((address, WEBHOOK_PORT), timeout=5) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    return signed_by_any(cert, (ca,))


def serving_under(address: str, ca: x509.Certificate) -> x509.Certificate | None:
    """What the pod serves, once ``ca`` signed it."""
    cert = served(address)
    return cert if signed_by(cert, ca) else None


def test_after_both_secrets_are_deleted_the_runbook_restores_the_webhook(lwgpu, namespace):
    plane = lwgpu.plane
    [old_ca] = ca_bundle(lwgpu)[:1]

    # The runbook: delete both Secrets; delete the finished Job and apply the install again,
    # which creates the Job anew; the install issues a new CA and serving certificate.
    plane.kubectl("delete", "secret", "lwgpu-ca", "lwgpu-webhook-tls", "-n", NAMESPACE)
    plane.kubectl(
        "delete", "job", "lwgpu-certs", "-n", NAMESPACE,
        "--ignore-not-found", "--cascade=foreground", "--wait=true",
    )  # fmt: skip
    plane.kubectl("apply", "--server-side", "-f", "-", input=render(plane))
    run_certificate_job(plane, lwgpu.kubelet)
    for webhook_pod in lwgpu.webhook:
        lwgpu.kubelet.sync_volumes(webhook_pod.name)

    bundle = ca_bundle(lwgpu)
    new_ca = bundle[0]
    assert new_ca != old_ca
    # The old CA stays only while it may be another installer's, not yet in a Secret
    # (certs/install.py, IN_FLIGHT); a compromise found later than that drops it at once.
    issued = old_ca.not_valid_before_utc
    assert bundle[1:] == ([old_ca] if datetime.now(UTC) - issued < IN_FLIGHT * 2 else [])
    for webhook_pod in lwgpu.webhook:
        cert = wait_for(
            lambda p=webhook_pod: serving_under(p.address, new_ca),
            timeout=30,
            what=f"{webhook_pod.name} to serve the new certificate",
        )
        assert not signed_by(cert, old_ca)

    created = namespace.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(pod()))
    spec = json.loads(created.stdout)["spec"]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert MEM in spec["nodeSelector"]
