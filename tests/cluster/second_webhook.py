"""A mutating webhook of another GPU system, for the lifecycle tests: served over TLS on
127.0.0.1 from a thread of the test process, registered for Deployments and Pods carrying the
SECOND label (tests/cluster/lifecycle_cases.py) in the namespaces a test names.

It adds `nvidia.com/gpumem: 4096` to containers asking `nvidia.com/gpu` without it, as HAMi's
defaulting does. Its configuration is named to sort after lwgpu-mutate
(staging/src/k8s.io/apiserver/pkg/admission/configuration/mutating_webhook_manager.go sorts
configurations `ByName`), so the apiserver calls it after lwgpu and then calls lwgpu again
(`reinvocationPolicy: IfNeeded`, apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go);
a MutatingAdmissionPolicy runs before every webhook and is reinvoked the same way
(apiserver/pkg/admission/plugin/policy/mutating/dispatcher.go).
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.cluster.lifecycle_cases import SECOND
from tools.cluster import pki
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for

GPU = "nvidia.com/gpu"
WAIT_S = 60


def gpumem_patch(obj: dict) -> list[dict]:
    """HAMi-style defaulting: `nvidia.com/gpumem: 4096` in every container that asks
    `nvidia.com/gpu` without it (a Pod, or a Deployment's template)."""
    base = "/spec" if obj["kind"] == "Pod" else "/spec/template/spec"
    spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
    patch = []
    for i, container in enumerate(spec.get("containers") or []):
        limits = (container.get("resources") or {}).get("limits") or {}
        if GPU in limits and "nvidia.com/gpumem" not in limits:
            path = f"{base}/containers/{i}/resources/limits/nvidia.com~1gpumem"
            patch.append({"op": "add", "path": path, "value": "4096"})
    return patch


CONFIG = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: {name}}}
webhooks:
- name: gpumem.lifecycle.lwgpu.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 5
  clientConfig: {{url: "https://127.0.0.1:{port}/mutate", caBundle: {ca}}}
  rules:
  - {{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE, UPDATE]}}
  - {{apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}}
  namespaceSelector:
    matchExpressions: [{{key: kubernetes.io/metadata.name, operator: In, values: {namespaces}}}]
  objectSelector: {{matchLabels: {label}}}
"""


class SecondWebhook:
    """The webhook's server; `calls` records (operation, kind, patched) of each review it
    answered."""

    def __init__(self, directory: Path) -> None:
        authority = pki.Authority(directory)
        cert, key = authority.issue("second-webhook", "127.0.0.1", ips=("127.0.0.1",))
        self.ca_bundle = base64.b64encode(authority.cert_path.read_bytes()).decode()
        self.calls: list[tuple[str, str, bool]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))[
                    "request"
                ]
                patch = gpumem_patch(request["object"])
                owner.calls.append((request["operation"], request["kind"]["kind"], bool(patch)))
                response = {"uid": request["uid"], "allowed": True}
                if patch:
                    encoded = base64.b64encode(json.dumps(patch).encode()).decode()
                    response.update(patchType="JSONPatch", patch=encoded)
                review = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": response,
                }
                body = json.dumps(review).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # the test's output stays quiet
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @contextlib.contextmanager
    def registered(
        self, plane: ControlPlane, namespaces: list[str], ready: Callable[[], bool]
    ) -> Iterator[None]:
        """Registered for Deployments and Pods of `namespaces` that carry the SECOND label,
        until the block ends; `ready` says when the apiserver calls it (a dry run it
        changes)."""
        name = f"zz-second-{namespaces[0]}"
        config = CONFIG.format(
            name=name,
            port=self.port,
            ca=self.ca_bundle,
            namespaces=json.dumps(namespaces),
            label=json.dumps(SECOND),
        )
        plane.kubectl("create", "-f", "-", input=config)
        try:
            wait_for(ready, WAIT_S, what="the apiserver to call the second webhook")
            self.calls.clear()
            yield
        finally:
            plane.kubectl("delete", "mutatingwebhookconfiguration", name)
