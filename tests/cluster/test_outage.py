"""What the real kube-apiserver answers when the webhook fails, by the failurePolicy of its
configuration. The shipped `mutate.lwgpu.io` fails open (Ignore): what it did not rewrite
meets the final-state check in the apiserver instead (test_failure_modes.py: each kind of pod
with the webhook stopped, before and after). A cluster may still choose Fail, or add the
validating webhook (Ignore); both are shown here.

The outages are made on copies of the installed webhook whose `clientConfig` differs, matched
only to objects labelled `lwgpu-test/broken: "true"` so no other test meets them, and deleted
at the end. The messages are the apiserver's (staging/src/k8s.io/apiserver/pkg/admission/
plugin/webhook/mutating/dispatcher.go, `callAttrMutatingHook`; errors.go, `ErrCallingWebhook`).
"""

from __future__ import annotations

import base64
import json
import re
import socket

import pytest

import certs
from tests.cluster.admission_support import Calls, installed_webhook, webhook_configuration
from tests.support.builders import container, pod
from tests.support.paths import SHIPPED_POLICY
from tools.cluster.install import WEBHOOK_PORT
from webhook.core.decision import decide
from webhook.files import load_policies

MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
BROKEN = {"lwgpu-test/broken": "true"}
GPU_MEM_POD = pod(container(limits={"aliyun.com/gpu-mem": 2}))
CPU_POD = pod(container(limits={"cpu": "1"}))
POLICY = load_policies(SHIPPED_POLICY).for_namespace("any")
REFUSED = (
    r'Error from server \(InternalError\): error when creating "STDIN": Internal error'
    r' occurred: failed calling webhook "{name}": failed to call webhook: {error}'
)


def labelled(obj: dict, labels: dict) -> dict:
    """`obj` with extra labels."""
    copy = json.loads(json.dumps(obj))
    copy["metadata"]["labels"] = {**copy["metadata"].get("labels", {}), **labels}
    return copy


def test_the_installed_webhook_fails_open_and_is_the_only_one(lwgpu):
    assert installed_webhook(lwgpu.plane, MUTATING, "lwgpu-mutate")["failurePolicy"] == "Ignore"
    validating = lwgpu.plane.kubectl("get", VALIDATING, "lwgpu-validate", check=False)
    assert "NotFound" in validating.stderr  # an option: deploy/components/validating-webhook


def test_with_the_webhook_up_a_gpu_pod_is_admitted_rewritten(lwgpu, namespace):
    done = namespace.kubectl("create", "-f", "-", input=json.dumps(GPU_MEM_POD))
    assert done.stdout.strip() == "pod/gpu created"
    limits = namespace.get("pod", "gpu")["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "1"}


def silent_port(sockets: list) -> int:
    """A port that accepts TCP connections (the kernel's backlog) but never answers TLS."""
    sock = socket.socket()
    sockets.append(sock)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock.getsockname()[1]


def closed_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def other_ca(tmp_path) -> str:
    """The caBundle of a CA that did not sign the webhook's certificate."""
    certs.generate(tmp_path, "lwgpu-webhook", "lwgpu-system")
    return base64.b64encode((tmp_path / "ca.crt").read_bytes()).decode()


# How each outage's clientConfig is made from the installed one (`shipped`), and the error the
# apiserver reports for it.
BREAK = {
    # The webhook's timeoutSeconds (5) runs out on a server that never answers.
    "timeout": (
        lambda shipped, lwgpu, tmp, socks: {
            "url": f"https://127.0.0.1:{silent_port(socks)}/mutate",
            "caBundle": shipped["caBundle"],
        },
        r'Post "https://127\.0\.0\.1:\d+/mutate\?timeout=5s": context deadline exceeded',
    ),
    "caBundle of another CA": (
        lambda shipped, lwgpu, tmp, socks: {**shipped, "caBundle": other_ca(tmp)},
        r'Post "https://lwgpu-webhook\.lwgpu-system\.svc:443/mutate\?timeout=5s": tls: failed to'
        r" verify certificate: x509: certificate signed by unknown authority"
        # both CAs bear one name: Go took the caBundle's as the issuer, and its key did not verify
        r' \(possibly because of "x509: ECDSA verification failure" while trying to verify'
        r' candidate authority certificate "lwgpu CA lwgpu-webhook\.lwgpu-system"\)',
    ),
    # The certificate names the Service's DNS names only: reached by address, it does not match.
    "name not in the certificate": (
        lambda shipped, lwgpu, tmp, socks: {
            "url": f"https://{lwgpu.webhook[0].address}:{WEBHOOK_PORT}/mutate",
            "caBundle": shipped["caBundle"],
        },
        rf'Post "https://(?P<address>[0-9.]+):{WEBHOOK_PORT}/mutate\?timeout=5s": tls: failed to'
        r" verify certificate: x509: cannot validate certificate for (?P=address) because it"
        r" doesn't contain any IP SANs",
    ),
    # The server's own error body is what the apiserver quotes for an HTTP error.
    "HTTP error": (
        lambda shipped, lwgpu, tmp, socks: {
            **shipped,
            "service": {**shipped["service"], "path": "/healthz"},
        },
        r"POST is not allowed on /healthz \(allowed: GET, HEAD, OPTIONS\)",
    ),
}


@pytest.mark.parametrize("outage", BREAK)
def test_failure_policy_fail_refuses_with_the_apiservers_error(lwgpu, namespace, tmp_path, outage):
    """Where a cluster sets failurePolicy Fail on the webhook."""
    shipped = installed_webhook(lwgpu.plane, MUTATING, "lwgpu-mutate")
    make, error = BREAK[outage]
    sockets: list[socket.socket] = []
    broken = {
        **shipped,
        "name": "broken.lwgpu.io",
        "failurePolicy": "Fail",
        "objectSelector": {"matchLabels": BROKEN},
        "clientConfig": make(shipped["clientConfig"], lwgpu, tmp_path, sockets),
    }
    try:
        with webhook_configuration(lwgpu.plane, MUTATING, "lwgpu-test-broken", broken):
            refused, admitted, quiet = (
                namespace.kubectl(
                    "create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
                )
                for obj in (
                    labelled(GPU_MEM_POD, BROKEN),
                    GPU_MEM_POD,  # not labelled: the copy does not match, lwgpu rewrites it
                    labelled(CPU_POD, BROKEN),  # the copy's matchConditions do not send it
                )
            )
    finally:
        for sock in sockets:
            sock.close()
    assert refused.returncode == 1
    # lwgpu-mutate sorts before lwgpu-test-broken and runs first: its warning comes before
    # the error (the apiserver calls configurations in name order).
    *warnings, last = refused.stderr.strip().splitlines()
    assert warnings == [f"Warning: {w}" for w in decide(GPU_MEM_POD, POLICY).warnings]
    pattern = REFUSED.format(name=re.escape("broken.lwgpu.io"), error=error)
    assert re.fullmatch(pattern, last), refused.stderr
    assert admitted.stdout.strip() == "pod/gpu created (server dry run)", admitted.stderr
    assert quiet.stdout.strip() == "pod/gpu created (server dry run)", quiet.stderr


def test_a_validating_webhook_that_fails_open_admits_what_was_rewritten(lwgpu, namespace):
    """The validating webhook of the option fails open: the final-state check has the last
    word, and the object the mutating webhook rewrote passes it."""
    shipped = installed_webhook(lwgpu.plane, MUTATING, "lwgpu-mutate")
    down = {
        **{k: v for k, v in shipped.items() if k != "reinvocationPolicy"},
        "name": "broken-validate.lwgpu.io",
        "objectSelector": {"matchLabels": BROKEN},
        "clientConfig": {
            "url": f"https://127.0.0.1:{closed_port()}/validate",
            "caBundle": shipped["clientConfig"]["caBundle"],
        },
    }
    obj = labelled(GPU_MEM_POD, BROKEN)
    calls = Calls(lwgpu)
    with webhook_configuration(lwgpu.plane, VALIDATING, "lwgpu-test-broken", down):
        done = namespace.kubectl("create", "-f", "-", input=json.dumps(obj))

    assert done.stdout.strip() == "pod/gpu created"
    assert calls.endpoints(namespace.name) == ["mutate"]  # lwgpu's own
    stored = namespace.get("pod", "gpu")
    decision = decide(obj, POLICY)
    limits = stored["spec"]["containers"][0]["resources"]["limits"]
    assert limits == decision.obj["spec"]["containers"][0]["resources"]["limits"]
    assert stored["spec"]["nodeSelector"] == decision.obj["spec"]["nodeSelector"]
