"""End to end through the install (`kubectl kustomize deploy/`, then the Helm chart's default
render), the real server over real TLS, and `tests/fakes/apiserver_harness.py`, a test double
of kube-apiserver's admission dispatcher.

The oracle is the pure decision (`webhook.decision.decide`) on the object as the apiserver hands
it to admission. One server serves the module; outages are other routes or configurations of
the dispatcher, so the server itself never has to go down.
"""

from __future__ import annotations

import base64
import shutil
import socket
from pathlib import Path

import pytest

import certs
from tests.fakes.apiserver_install import running
from tests.fakes.apiserver_rules import as_received, schema_error
from tests.support import helm
from tests.support.builders import container, pod, workload
from tests.support.manifests import corpus_files, documents
from tests.support.paths import EXAMPLES, REPO
from tests.support.server import free_port
from webhook.core.decision import decide
from webhook.policy import load_policies

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

NS, NS_LABELS = "team-a", {"team": "a"}
POLICY = load_policies(REPO / "policies" / "default.yaml").for_namespace(NS)
MUTATE, VALIDATE = "mutate.lwgpu.io", "validate.lwgpu.io"
GPU_MEM_POD = pod(container(limits={"aliyun.com/gpu-mem": 2}))
SEED_POD = pod(
    container(limits={"nvidia.com/gpu": "1"}),
    node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"},
)
CPU_POD = pod(container(limits={"cpu": "1"}))
ANNOTATED_POD = pod(container(), annotations={"lwgpu.io/gpu-memory": "1536Mi"})
GPU_DEPLOYMENT = workload("apps/v1", "Deployment", GPU_MEM_POD)

SEEDS = {"cuda-sample.yaml#0": "allowed", "cuda-sample-gpu-mem.yaml#0": "mutated"}
DOCUMENTS = {
    Path(d.where).name: d.body
    for f in [*corpus_files(), *(EXAMPLES / s.split("#")[0] for s in SEEDS)]
    for d in documents(f)
}
# Removed API versions: a recent apiserver refuses them before admission ("no matches for kind").
NOT_SERVED = {
    "AliyunContainerService__gpushare-device-plugin__demo__binpack-1__binpack-1.yaml#1",
    "kubernetes__examples___archived__cockroachdb__cockroachdb-statefulset.yaml#2",
    "kubernetes__website__content__en__examples__application__job__cronjob.yaml#0",
}
# Invalid as written, whatever the webhook does: integers in string fields, and kustomize patch
# fragments without a selector.
INVALID_AS_WRITTEN = {
    "milvus-io__milvus__ci__jenkins__pod__milvus-gpu-version-build-env-pod.yaml#0",
    "milvus-io__milvus__ci__jenkins__pod__rte-gpu.yaml#0",
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__mig__patch.yaml#0",
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__mps__patch.yaml#0",
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__ts__patch.yaml#0",
}
CUSTOM_RESOURCES = {
    "volcano-sh__volcano__example__MindSpore-example__mindspore_gpu__mindspore-gpu.yaml#0"
}


def asks_gpu(obj: dict) -> bool:
    """What webhook-scope.yaml says its matchConditions send, written apart from its CEL."""
    spec = obj.get("spec") or {}
    job = (spec.get("jobTemplate") or {}).get("spec") or {}
    for template in (obj, spec.get("template") or {}, job.get("template") or {}):
        if "lwgpu.io/gpu-memory" in ((template.get("metadata") or {}).get("annotations") or {}):
            return True
        inner = template.get("spec") or {}
        for each in (inner.get("containers") or []) + (inner.get("initContainers") or []):
            resources = (each or {}).get("resources") or {}
            names = [*(resources.get("limits") or {}), *(resources.get("requests") or {})]
            if any("gpu" in name for name in names):
                return True
    return False


def reviews_answered(server) -> float:
    """Requests the server answered on /mutate and /validate: reviews and HTTP errors."""
    counted = ("lwgpu_admission_reviews_total", "lwgpu_admission_request_errors_total")
    return sum(value for (name, _), value in server.metrics().items() if name in counted)


@pytest.fixture(scope="module", params=["kustomize", "chart"])
def install(request, tmp_path_factory):
    """The dispatcher and the server of each default install: `kubectl kustomize deploy/` and
    the Helm chart's `helm template` (skipped where no helm can be had)."""
    objects = None
    if request.param == "chart":
        request.getfixturevalue("helm_bin")  # skips, with the reason, where no helm can be had
        objects = helm.template()
    with running(tmp_path_factory.mktemp("e2e"), objects) as (apiserver, server):
        yield apiserver, server


@pytest.mark.parametrize("doc_id", sorted(DOCUMENTS))
def test_every_document_is_admitted_as_the_decision_says(install, doc_id):
    apiserver, _ = install
    result = apiserver.admit(DOCUMENTS[doc_id], NS, NS_LABELS)
    if doc_id in NOT_SERVED:
        assert (result.allowed, result.calls) == (False, [])
        assert result.message.startswith("no matches for kind")
        return
    received = as_received(DOCUMENTS[doc_id], NS)
    decision = decide(received, POLICY)
    assert SEEDS.get(doc_id, decision.outcome) == decision.outcome
    assert result.allowed is decision.allowed, result.message
    assert result.obj == (decision.obj if decision.outcome == "mutated" else received)
    sent = asks_gpu(received)
    assert sent or decision.outcome == "skipped"
    if decision.outcome == "denied":
        assert result.called == [MUTATE]
        assert result.message == (
            f'admission webhook "{MUTATE}" denied the request: {decision.reason}'
        )
    else:
        assert result.called == ([MUTATE, VALIDATE] if sent else [])
        assert result.warnings == list(decision.warnings)
        patched = [MUTATE] if decision.outcome == "mutated" else []
        assert [name for name, _ in result.patches] == patched
    assert result.schema_checked is (doc_id not in CUSTOM_RESOURCES)
    if doc_id in INVALID_AS_WRITTEN:  # the webhook neither causes nor hides the error
        assert result.schema_error is not None
        assert result.schema_error == schema_error(received)[0]
    else:
        assert result.schema_error is None


def test_the_corpus_exercises_every_outcome():
    outcomes = {decide(as_received(body, NS), POLICY).outcome for body in DOCUMENTS.values()}
    assert outcomes == {"skipped", "allowed", "mutated", "denied"}


def test_objects_without_gpu_never_reach_the_server(install):
    apiserver, server = install
    quiet = [
        body
        for key, body in DOCUMENTS.items()
        if key not in NOT_SERVED and not asks_gpu(as_received(body, NS))
    ]
    before, logged = reviews_answered(server), len(server.log_lines())
    results = [apiserver.admit(body, NS, NS_LABELS) for body in quiet]
    assert len(quiet) > 20 and all(r.allowed and not r.calls for r in results)
    assert (reviews_answered(server), len(server.log_lines())) == (before, logged)


BOTH = [MUTATE, VALIDATE]
# object, operation, namespace, namespace labels, webhooks called
ROUTING = {
    "gpu pod": (GPU_MEM_POD, "CREATE", NS, NS_LABELS, BOTH),
    "annotated pod": (ANNOTATED_POD, "CREATE", NS, NS_LABELS, BOTH),
    "deployment update": (GPU_DEPLOYMENT, "UPDATE", NS, NS_LABELS, BOTH),
    "pod update": (GPU_MEM_POD, "UPDATE", NS, NS_LABELS, []),  # pod specs are immutable
    "pod delete": (GPU_MEM_POD, "DELETE", NS, NS_LABELS, []),
    "cpu pod": (CPU_POD, "CREATE", NS, NS_LABELS, []),
    "kube-system pod": (GPU_MEM_POD, "CREATE", "kube-system", {}, []),
    "lwgpu-system pod": (
        GPU_MEM_POD,
        "CREATE",
        "lwgpu-system",
        {"pod-security.kubernetes.io/enforce": "restricted"},
        [],
    ),
    "kube-system deployment": (GPU_DEPLOYMENT, "CREATE", "kube-system", {}, []),
    "lwgpu-system deployment": (GPU_DEPLOYMENT, "CREATE", "lwgpu-system", {}, []),
    # The apiserver sets kubernetes.io/metadata.name itself: a label cannot opt a namespace out.
    "forged name label": (
        GPU_MEM_POD,
        "CREATE",
        NS,
        {"kubernetes.io/metadata.name": "kube-system"},
        BOTH,
    ),
}


@pytest.mark.parametrize("case", ROUTING)
def test_which_requests_reach_the_server(install, case):
    obj, operation, namespace, labels, called = ROUTING[case]
    apiserver, server = install
    before = reviews_answered(server)
    old = obj if operation != "CREATE" else None
    result = apiserver.admit(obj, namespace, labels, operation=operation, old=old)
    assert result.allowed and result.called == called
    assert reviews_answered(server) - before == len(called)
    if not called:
        assert result.obj == as_received(obj, namespace)


def silent_port(sockets: list) -> int:
    """A port that accepts TCP connections (kernel backlog) but never answers TLS."""
    sock = socket.socket()
    sockets.append(sock)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock.getsockname()[1]


def other_ca(tmp_path: Path) -> str:
    """The caBundle of a CA that did not sign the server's certificate."""
    certs.generate(tmp_path, "lwgpu-webhook", "lwgpu-system")
    return base64.b64encode((tmp_path / "ca.crt").read_bytes()).decode()


def other_port(address: str, port: int) -> str:
    """`host:port` with another port."""
    return f"{address.rsplit(':', 1)[0]}:{port}"


# How each outage is made from the working dispatcher `a`, its Service address `svc`.
BREAK = {
    "server down": lambda a, svc, tmp, socks: a.with_routes({svc: free_port()}),
    "validating webhook down": lambda a, svc, tmp, socks: a.reconfigured(
        VALIDATE, port=444
    ).with_routes({other_port(svc, 444): free_port()}),
    "timeout": lambda a, svc, tmp, socks: a.with_routes({svc: silent_port(socks)}),
    "caBundle of another CA": lambda a, svc, tmp, socks: a.reconfigured(
        MUTATE, caBundle=other_ca(tmp)
    ),
    "name not in the certificate": lambda a, svc, tmp, socks: a.reconfigured(
        MUTATE, name="other"
    ).with_routes({"other.lwgpu-system.svc:443": a.routes[svc]}),
    "HTTP error": lambda a, svc, tmp, socks: a.reconfigured(MUTATE, path="/healthz"),
}
# outage, object, allowed, webhooks called, error of the failing call (None: no call failed)
OUTAGES = [
    ("server down", GPU_MEM_POD, False, [MUTATE], "Connection refused"),
    ("server down", SEED_POD, False, [MUTATE], "Connection refused"),
    ("server down", CPU_POD, True, [], None),
    ("validating webhook down", GPU_MEM_POD, True, BOTH, "Connection refused"),
    ("timeout", GPU_MEM_POD, False, [MUTATE], "timed out"),
    ("caBundle of another CA", GPU_MEM_POD, False, [MUTATE], "CERTIFICATE_VERIFY_FAILED"),
    ("name not in the certificate", GPU_MEM_POD, False, [MUTATE], "Hostname mismatch"),
    ("HTTP error", GPU_MEM_POD, False, [MUTATE], "HTTP 405"),
]


@pytest.mark.parametrize("outage, obj, allowed, called, error", OUTAGES)
def test_failure_policy_when_the_webhook_fails(
    install, tmp_path, outage, obj, allowed, called, error
):
    apiserver, _ = install
    policies = {h.name: h.spec["failurePolicy"] for h in apiserver.webhooks}
    assert policies == {MUTATE: "Fail", VALIDATE: "Ignore"}
    sockets: list[socket.socket] = []
    broken = BREAK[outage](apiserver, next(iter(apiserver.routes)), tmp_path, sockets)
    try:
        result = broken.admit(obj, NS, NS_LABELS)
    finally:
        broken.close()
        for sock in sockets:
            sock.close()
    assert (result.allowed, result.called) == (allowed, called), result.message
    failed = [c for c in result.calls if c.error]
    if error is None:
        assert not failed and result.obj == as_received(obj, NS)
        return
    [call] = failed
    assert call.error.startswith('Post "https://') and "?timeout=5s" in call.error
    assert error in call.error
    assert policies[call.webhook] == ("Ignore" if allowed else "Fail")
    if allowed:  # the mutating webhook still rewrote it; only the final check was skipped
        assert result.obj == decide(as_received(obj, NS), POLICY).obj
    else:
        assert result.message.startswith(
            f'Internal error occurred: failed calling webhook "{MUTATE}": '
        )


def add_label(obj: dict) -> list:
    """Another webhook's patch: label the object (a change after ours)."""
    return [{"op": "add", "path": "/metadata/labels", "value": {"injected": "yes"}}]


def add_gpu_sidecar(obj: dict) -> list:
    """Another webhook's patch: inject a sidecar that asks for GPU memory too."""
    return [
        {
            "op": "add",
            "path": "/spec/containers/-",
            "value": container("sidecar", limits={"aliyun.com/gpu-mem": 1}),
        }
    ]


def no_change(obj: dict) -> list:
    """Another webhook that changes nothing."""
    return []


# another mutating webhook after ours, allowed, webhooks called
REINVOCATIONS = [
    (no_change, True, [MUTATE, "no_change", VALIDATE]),
    (add_label, True, [MUTATE, "add_label", MUTATE, VALIDATE]),
    (add_gpu_sidecar, False, [MUTATE, "add_gpu_sidecar", MUTATE]),
]


@pytest.mark.parametrize("other, allowed, called", REINVOCATIONS)
def test_reinvocation_if_needed(install, other, allowed, called):
    apiserver, _ = install
    result = apiserver.with_local_webhook(other.__name__, other).admit(GPU_MEM_POD, NS, NS_LABELS)
    assert (result.allowed, result.called) == (allowed, called), result.message
    assert [name for name, _ in result.patches].count(MUTATE) == 1
    reinvoked = [c.webhook for c in result.calls if c.reinvocation]
    assert reinvoked == ([MUTATE] if called.count(MUTATE) == 2 else [])
    if allowed:  # idempotent: the rewritten object needs no second patch
        expected = decide(as_received(GPU_MEM_POD, NS), POLICY).obj
        assert result.obj["spec"] == expected["spec"]
    else:  # two containers asking for GPU memory need two GPUs: the second pass refuses it
        assert result.message.startswith(f'admission webhook "{MUTATE}" denied the request: ')


@pytest.mark.parametrize("obj", [GPU_MEM_POD, SEED_POD, GPU_DEPLOYMENT])
def test_dry_run_is_answered_like_a_real_request(install, obj):
    apiserver, server = install
    real, dry = (apiserver.admit(obj, NS, NS_LABELS, dry_run=flag) for flag in (False, True))
    assert dry.called == real.called == BOTH
    assert (dry.allowed, dry.obj, dry.warnings) == (real.allowed, real.obj, real.warnings)
    assert [p for _, p in dry.patches] == [p for _, p in real.patches]
    logged = {line["uid"]: line["dry_run"] for line in server.log_lines()}
    assert [logged[c.uid] for c in real.calls] == [False, False]
    assert [logged[c.uid] for c in dry.calls] == [True, True]


def test_one_kept_alive_connection_per_webhook(install):
    apiserver, _ = install
    first = apiserver.admit(GPU_MEM_POD, NS, NS_LABELS)
    sockets = {name: conn.sock for name, conn in apiserver.connections.items()}
    second = apiserver.admit(GPU_MEM_POD, NS, NS_LABELS)
    assert first.called == second.called == BOTH
    assert set(sockets) == set(BOTH) and None not in sockets.values()
    assert {name: conn.sock for name, conn in apiserver.connections.items()} == sockets
