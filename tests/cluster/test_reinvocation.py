"""Another mutating webhook after lwgpu's, on the real control plane: lwgpu-mutate's
`reinvocationPolicy: IfNeeded` makes the apiserver call lwgpu again when a later webhook
changed the object (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/
dispatcher.go, `Dispatch`: `ShouldReinvokeWebhook` once the object changed after lwgpu's call),
and the stored object is what lwgpu's decision makes of the object it got the second time.

The other webhook is served by this test process over HTTPS on 127.0.0.1 and registered by
`url` with its own caBundle, in a configuration named `lwgpu-test-other` (configurations are
called in name order, so after `lwgpu-mutate`), matched only to pods labelled
`lwgpu-test/other: "true"`, and deleted at the end.
"""

from __future__ import annotations

import base64
import copy
import http.server
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import jsonpatch
import pytest

import certs
from tests.cluster.admission_support import MUTATE, Calls, webhook_configuration
from tests.support.builders import container, pod
from tests.support.paths import SHIPPED_POLICY
from webhook.core.decision import decide
from webhook.files import load_policies

OTHER = {"lwgpu-test/other": "true"}
GPU_MEM_POD = pod(container(limits={"aliyun.com/gpu-mem": 2}))
GPU_MEM_POD["metadata"]["labels"] = dict(OTHER)


def no_change(obj: dict) -> list:
    """Another webhook that changes nothing."""
    return []


def add_label(obj: dict) -> list:
    """Another webhook's patch: label the object."""
    return [{"op": "add", "path": "/metadata/labels/injected", "value": "yes"}]


def ask_more_gpu_memory(obj: dict) -> list:
    """Another webhook's patch: the first container asks 4 GiB of GPU memory instead."""
    return [
        {
            "op": "replace",
            "path": "/spec/containers/0/resources",
            "value": {"limits": {"aliyun.com/gpu-mem": "4"}},
        }
    ]


def add_gpu_sidecar(obj: dict) -> list:
    """Another webhook's patch: inject a sidecar that asks for GPU memory too."""
    sidecar = container("sidecar", limits={"aliyun.com/gpu-mem": "1"})
    return [{"op": "add", "path": "/spec/containers/-", "value": sidecar}]


class OtherWebhook:
    """A mutating webhook on 127.0.0.1 that answers with `patcher`'s JSON patch and keeps
    what it received."""

    def __init__(self, directory: Path) -> None:
        certs.generate(directory, "other", "lwgpu-test", ips=["127.0.0.1"])
        self.ca_bundle = base64.b64encode((directory / "ca.crt").read_bytes()).decode()
        self.patcher: Callable[[dict], list] = no_change
        self.received: list[dict] = []
        webhook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                webhook.received.append(request["object"])
                response = {"uid": request["uid"], "allowed": True}
                if ops := webhook.patcher(request["object"]):
                    response["patchType"] = "JSONPatch"
                    response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
                body = json.dumps({**review, "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass  # the test reads what it received, not a log

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def configuration(self) -> dict:
        """Its one webhook, as the MutatingWebhookConfiguration lists it."""
        return {
            "name": "other.lwgpu-test.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "objectSelector": {"matchLabels": OTHER},
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods"],
                    "operations": ["CREATE"],
                    "scope": "Namespaced",
                }
            ],
            "clientConfig": {
                "url": f"https://127.0.0.1:{self.server.server_address[1]}/",
                "caBundle": self.ca_bundle,
            },
        }

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def other(lwgpu, tmp_path_factory) -> Iterator[OtherWebhook]:
    """The other webhook, served and registered for the module."""
    served = OtherWebhook(tmp_path_factory.mktemp("other-webhook"))
    try:
        with webhook_configuration(
            lwgpu.plane, "MutatingWebhookConfiguration", "lwgpu-test-other", served.configuration()
        ):
            yield served
    finally:
        served.close()


# the other webhook's change, whether lwgpu is called again, and its decision the second time
REINVOCATIONS = [
    (no_change, False, None),
    (add_label, True, "allowed"),  # already in the lightweight form: idempotent
    (ask_more_gpu_memory, True, "mutated"),  # rewritten again, to the 4096MiB class
    (add_gpu_sidecar, True, "denied"),  # two containers asking GPU memory need two GPUs
]


@pytest.mark.parametrize("patcher, reinvoked, second", REINVOCATIONS)
def test_lwgpu_is_called_again_when_a_later_webhook_changes_the_pod(
    lwgpu, namespace, other, patcher, reinvoked, second
):
    policy = load_policies(SHIPPED_POLICY).for_namespace(namespace.name)
    other.patcher, other.received = patcher, []
    calls = Calls(lwgpu)

    done = namespace.kubectl("create", "-f", "-", input=json.dumps(GPU_MEM_POD), check=False)

    [seen_by_other] = other.received  # the other webhook is not reinvoked (policy Never)
    first = decide(GPU_MEM_POD, policy)
    assert first.outcome == "mutated"
    # It runs after lwgpu: it got lwgpu's rewrite.
    limits = seen_by_other["spec"]["containers"][0]["resources"]["limits"]
    assert limits == first.obj["spec"]["containers"][0]["resources"]["limits"]
    changed = jsonpatch.apply_patch(copy.deepcopy(seen_by_other), patcher(seen_by_other))
    mutations = [c for c in calls.since(namespace.name, "Pod") if c["endpoint"] == "mutate"]
    assert len(mutations) == (2 if reinvoked else 1)
    final = decide(changed, policy)
    assert final.outcome == (second or "allowed")
    *printed, last = done.stderr.strip().splitlines() or [""]
    # every call's warnings reach kubectl, the first call's too when the second refuses
    warnings = [*first.warnings, *(final.warnings if reinvoked else ())]
    if final.outcome == "denied":
        assert done.returncode == 1
        assert printed == [f"Warning: {w}" for w in warnings]
        assert last == (
            'Error from server (Forbidden): error when creating "STDIN": admission webhook'
            f' "{MUTATE}" denied the request: {final.reason}'
        )
        return
    assert done.returncode == 0, done.stderr
    assert [*printed, last] == [f"Warning: {w}" for w in warnings]
    stored = namespace.get("pod", "gpu")
    want = final.obj if final.outcome == "mutated" else changed
    resources = [
        [c["resources"]["limits"] for c in o["spec"]["containers"]] for o in (stored, want)
    ]
    assert resources[0] == resources[1]
    assert stored["spec"].get("nodeSelector") == want["spec"].get("nodeSelector")
    assert stored["metadata"]["labels"] == want["metadata"]["labels"]
