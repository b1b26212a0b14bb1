"""What the real kube-apiserver answers when the webhook fails, by the failurePolicy of the
installed configurations: Fail for `mutate.lwgpu.io` (a GPU object is refused, so it is
retried rather than admitted unrewritten), Ignore for `validate.lwgpu.io`.

The webhook down is the installed one stopped (its pods stay Ready, as right after a crash, so
the apiserver still dials their addresses). The other outages are made on copies of the
installed webhooks whose `clientConfig` differs, matched only to objects labelled
`lwgpu-test/broken: "true"` so no other test meets them, and deleted at the end. The messages
are the apiserver's (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/
dispatcher.go, `callAttrMutatingHook`; errors.go, `ErrCallingWebhook`).
"""

from __future__ import annotations

import base64
import json
import re
import socket
from collections.abc import Iterator

import pytest

import certs
from tests.cluster.admission_support import (
    MUTATE,
    VALIDATE,
    Calls,
    installed_webhook,
    webhook_configuration,
)
from tests.support.builders import container, pod
from tests.support.paths import SHIPPED_POLICY
from tools.cluster.install import WEBHOOK_PORT
from webhook.core.decision import decide
from webhook.files import load_policies

MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
BROKEN = {"lwgpu-test/broken": "true"}
GPU_MEM_POD = pod(container(limits={"aliyun.com/gpu-mem": 2}))
WHOLE_GPU_POD = pod(container(limits={"nvidia.com/gpu": "2"}))
SEED_POD = pod(  # the lightweight form the seed's rewrite produces
    container(limits={"nvidia.com/gpu": "1"}),
    node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"},
)
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


def test_the_installed_failure_policies(lwgpu):
    policies = {
        installed_webhook(lwgpu.plane, kind, name)["name"]: (
            installed_webhook(lwgpu.plane, kind, name)["failurePolicy"]
        )
        for kind, name in ((MUTATING, "lwgpu-mutate"), (VALIDATING, "lwgpu-validate"))
    }
    assert policies == {MUTATE: "Fail", VALIDATE: "Ignore"}


@pytest.fixture(scope="class")
def webhook_down(lwgpu) -> Iterator[None]:
    """Every webhook process stopped for the tests of a class; started again after them."""
    lwgpu.stop_webhook()
    try:
        yield
    finally:
        lwgpu.start_webhook()


# object, whether the apiserver refuses it while the webhook is down
WHILE_DOWN = {
    "cpu pod": (CPU_POD, False),
    "gpu memory pod": (GPU_MEM_POD, True),
    "whole-gpu pod": (WHOLE_GPU_POD, True),
    "pod in the seed's lightweight form": (SEED_POD, True),
}


@pytest.mark.usefixtures("webhook_down")
class TestWebhookDown:
    @pytest.mark.parametrize("case", WHILE_DOWN)
    def test_only_objects_that_mention_a_gpu_are_refused(self, lwgpu, namespace, case):
        obj, refused = WHILE_DOWN[case]

        done = namespace.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)

        if not refused:
            assert done.stdout.strip() == "pod/gpu created", done.stderr
            return
        assert done.returncode == 1
        error = (
            r'Post "https://lwgpu-webhook\.lwgpu-system\.svc:443/mutate\?timeout=5s":'
            rf" dial tcp (?P<address>[0-9.]+):{WEBHOOK_PORT}: connect: connection refused"
        )
        found = re.fullmatch(
            REFUSED.format(name=re.escape(MUTATE), error=error), done.stderr.strip()
        )
        assert found, done.stderr
        assert found["address"] in {p.address for p in lwgpu.webhook}
        assert namespace.kubectl("get", "pods", "-o", "name").stdout == ""

    def test_kube_system_is_never_sent_so_it_can_recover(self, lwgpu):
        done = lwgpu.plane.kubectl(
            "create", "-n", "kube-system", "--dry-run=server", "-f", "-",
            input=json.dumps(GPU_MEM_POD),
        )  # fmt: skip
        assert done.stdout.strip() == "pod/gpu created (server dry run)"


def test_back_up_a_gpu_pod_is_admitted_rewritten(lwgpu, namespace):
    """After TestWebhookDown restarted the webhook (and on its own, with it up)."""
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
    shipped = installed_webhook(lwgpu.plane, MUTATING, "lwgpu-mutate")
    make, error = BREAK[outage]
    sockets: list[socket.socket] = []
    broken = {
        **shipped,
        "name": "broken.lwgpu.io",
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


def test_failure_policy_ignore_admits_what_the_mutating_webhook_rewrote(lwgpu, namespace):
    shipped = installed_webhook(lwgpu.plane, VALIDATING, "lwgpu-validate")
    down = {
        **shipped,
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
    assert calls.endpoints(namespace.name) == ["mutate", "validate"]  # lwgpu's own, both up
    stored = namespace.get("pod", "gpu")
    decision = decide(obj, POLICY)
    limits = stored["spec"]["containers"][0]["resources"]["limits"]
    assert limits == decision.obj["spec"]["containers"][0]["resources"]["limits"]
    assert stored["spec"]["nodeSelector"] == decision.obj["spec"]["nodeSelector"]
