"""lwgpu installed in a running control plane as `kubectl apply -k deploy/` installs it.

The manifests are applied server-side unchanged. The pods that must run for the install to
work are run by `kubelet.Kubelet` from the checkout: the certificate Job's pod (`python -m
certs install`, as the Job's ServiceAccount, which creates the serving Secret and patches the
`caBundle`) and the webhook Deployment's pods (`python -m webhook serve`, as the webhook's
ServiceAccount). kube-apiserver then reaches the webhook exactly as in a cluster: through the
`lwgpu-webhook` Service's ready endpoints, verified against the `caBundle` with the Service's
DNS name.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tools.cluster import processes
from tools.cluster.controlplane import ControlPlane, ControlPlaneError
from tools.cluster.kubelet import REPO, Kubelet, RunningPod

NAMESPACE = "lwgpu-system"
WEBHOOK_LABEL = "app.kubernetes.io/name=lwgpu-webhook"
CERTS_LABEL = "app.kubernetes.io/name=lwgpu-certs"
WEBHOOK_PORT = 8443
POLICIES = "lwgpu-policies"
WAIT_S = 60


@dataclass
class Installation:
    """lwgpu running in the cluster: the kubelet that runs its pods and the webhook's pods."""

    plane: ControlPlane
    kubelet: Kubelet
    webhook: list[RunningPod] = field(default_factory=list)

    @property
    def tls_ca(self) -> Path:
        """The CAs the apiserver trusts for the webhook, `lwgpu-mutate`'s caBundle as the
        certificate Job wrote it, in a file (read anew each time: a CA roll changes it)."""
        config = self.kubelet.plane.kubectl(
            "get", "mutatingwebhookconfiguration", "lwgpu-mutate", "-o", "json"
        )
        bundle = json.loads(config.stdout)["webhooks"][0]["clientConfig"]["caBundle"]
        path = self.kubelet.dir / "lwgpu-mutate-ca.crt"
        path.write_bytes(base64.b64decode(bundle))
        return path

    def set_policies(self, files: dict[str, str]) -> None:
        """Replace the `lwgpu-policies` ConfigMap's files and wait until every webhook worker
        serves them, as after an admin's `kubectl apply` of a new policy: kubelet updates the
        volume, the server's poller reloads (its `lwgpu_policy_generation` moves)."""
        core = self.kubelet.core
        current = core.read_namespaced_config_map(POLICIES, NAMESPACE)
        if (current.data or {}) == files:
            return
        before = {pod.name: self.metric(pod, "lwgpu_policy_generation") for pod in self.webhook}
        failed = {
            pod.name: self.metric(pod, "lwgpu_policy_reload_failures_total") for pod in self.webhook
        }
        current.data = files
        core.replace_namespaced_config_map(POLICIES, NAMESPACE, current)
        for pod in self.webhook:
            self.kubelet.sync_volumes(pod.name)
        deadline = time.monotonic() + WAIT_S
        for pod in self.webhook:
            while self.metric(pod, "lwgpu_policy_generation") <= before[pod.name]:
                if self.metric(pod, "lwgpu_policy_reload_failures_total") > failed[pod.name]:
                    raise ControlPlaneError(
                        f"{pod.name} refused the policy:\n{processes.tail(pod.log)}"
                    )
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"{pod.name} did not reload the policy")
                time.sleep(0.1)

    def samples(self, pod: RunningPod) -> list[Sample]:
        """Every sample of a webhook pod's /metrics, read by its address over TLS."""
        context = ssl.create_default_context(cafile=str(self.tls_ca))
        context.check_hostname = False  # reached by address; the certificate names DNS
        url = f"https://{pod.address}:{WEBHOOK_PORT}/metrics"
        with urllib.request.urlopen(url, context=context, timeout=10) as answer:
            text = answer.read().decode()
        return [s for family in text_string_to_metric_families(text) for s in family.samples]

    def metric(self, pod: RunningPod, name: str) -> float:
        """The value of the unlabelled sample `name` of a webhook pod (0 when absent)."""
        return next((s.value for s in self.samples(pod) if s.name == name), 0.0)

    def stop_webhook(self) -> None:
        """Stop every webhook process (the pods stay Ready, as right after a crash)."""
        for pod in self.webhook:
            self.kubelet.stop(pod.name)

    def start_webhook(self) -> None:
        """Run the webhook Deployment's bound pods again and wait until they are Ready."""
        self.webhook = [self.kubelet.run(pod) for pod in bound_pods(self.plane, WEBHOOK_LABEL, 0)]
        for pod in self.webhook:
            self.kubelet.wait_ready(pod, self.tls_ca, WEBHOOK_PORT)


def pods(plane: ControlPlane, selector: str) -> list[dict[str, Any]]:
    """The pods of lwgpu's namespace that match a label selector."""
    answer = plane.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(answer.stdout)["items"]
    return items


def bound_pods(plane: ControlPlane, selector: str, count: int) -> list[dict[str, Any]]:
    """Wait until at least `count` matching pods exist and are all bound to a node."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = [p for p in pods(plane, selector) if not p["metadata"].get("deletionTimestamp")]
        if len(found) >= count and all(p["spec"].get("nodeName") for p in found):
            return found
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"pods {selector}: {len(found)} bound of {count} wanted")
        time.sleep(0.1)


def render(plane: ControlPlane, path: Path = REPO / "deploy") -> str:
    """`kubectl kustomize` of a kustomization (the default install unless told another)."""
    return plane.kubectl("kustomize", str(path)).stdout


def run_certificate_job(plane: ControlPlane, kubelet: Kubelet) -> None:
    """Run the certificate Job's pod to its end, as kubelet would, and report it Succeeded."""
    (pod,) = bound_pods(plane, CERTS_LABEL, 1)
    job = kubelet.run(pod)
    if job.process.wait(WAIT_S):
        raise ControlPlaneError(f"the certificate Job failed:\n{processes.tail(job.log)}")
    kubelet.core.patch_namespaced_pod_status(
        job.name, NAMESPACE, {"status": {"phase": "Succeeded"}}
    )


def _wait_endpoints(plane: ControlPlane, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        slices = json.loads(
            plane.kubectl(
                "get",
                "endpointslices",
                "-n",
                NAMESPACE,
                "-l",
                "kubernetes.io/service-name=lwgpu-webhook",
                "-o",
                "json",
            ).stdout
        )["items"]
        ready = [
            e
            for s in slices
            for e in s.get("endpoints") or []
            if e.get("conditions", {}).get("ready")
        ]
        if len(ready) >= count:
            return
        time.sleep(0.1)
    raise ControlPlaneError(f"the lwgpu-webhook Service has fewer than {count} ready endpoints")


@contextmanager
def installed(
    plane: ControlPlane, workdir: Path, manifests: str | None = None
) -> Iterator[Installation]:
    """Apply lwgpu's manifests (`deploy/` rendered, unless given) and run its pods."""
    plane.kubectl("apply", "--server-side", "-f", "-", input=manifests or render(plane))
    kubelet = Kubelet(plane, workdir)
    try:
        run_certificate_job(plane, kubelet)
        installation = Installation(plane, kubelet)
        replicas = json.loads(
            plane.kubectl(
                "get", "deployment", "lwgpu-webhook", "-n", NAMESPACE, "-o", "json"
            ).stdout
        )["spec"]["replicas"]
        bound_pods(plane, WEBHOOK_LABEL, replicas)
        installation.start_webhook()
        _wait_endpoints(plane, replicas)
        yield installation
    finally:
        kubelet.close()
