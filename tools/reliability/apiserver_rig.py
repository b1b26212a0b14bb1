"""What `apiserver_faults.py` runs its faults on: the real control plane, lwgpu's three API
clients running against it through a `SlowProxy`, each as a ServiceAccount of its own (APF
can throttle those; the admin, in system:masters, is exempt), and what each of them shows.

- discoverProfiles: a `NodeInventory` in this process (the class `serve` runs, with watches
  of `WATCH_S` seconds instead of 300, so that a fault meets a watch resuming from its
  resourceVersion), and `webhook serve` discovering, asked a review of a 5 GiB pod every
  `REVIEW_EVERY_S` (its answer names the class the Nodes offer).
- label-node: `webhook.node.labeller.run` every `LABEL_EVERY_S` on a Node of its own.
- certs install: `python -m certs install` as a process, for one webhook configuration.

The accounts are bound to cluster-admin: what is measured (deadlines, retries, logs) does not
depend on their rules. The Nodes' watch cache can be turned off for one fault
(`restart_apiserver("--watch-cache-sizes=nodes#0")`, tools/cluster/controlplane.py).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import urllib3
from cryptography import x509
from kubernetes import client

from certs.certset import signed_by_any
from tools.cluster import controlplane
from tools.cluster.controlplane import ControlPlane
from tools.cluster.kubelet import Kubelet
from tools.loopback.server import Server, serving
from tools.paths import REPO
from tools.reliability.slow_proxy import SlowProxy
from webhook.kube.client import api_client
from webhook.kube.inventory import NodeInventory
from webhook.node import labeller

NAMESPACE = "faults"
ACCOUNTS = ("webhook", "labeller", "installer")
MEM, NAME = "aliyun.accelerator/nvidia_mem", "aliyun.accelerator/nvidia_name"
LABELS = {"aliyun.accelerator/nvidia_count": "1", MEM: "2048MiB", NAME: "GRID-P4-2Q"}
PROBE, LABELLED, CONFIG = "probe", "labelled", "lwgpu-faults"
WATCH_S = 5
REVIEW_EVERY_S = 0.05
LABEL_EVERY_S = 1.0
REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "faults",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default",
        "operation": "CREATE",
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "gpu"},
            "spec": {
                "containers": [{"name": "c", "resources": {"limits": {"aliyun.com/gpu-mem": "5"}}}]
            },
        },
    },
}


@dataclass(frozen=True)
class Review:
    """One review: when it was sent, how long it took, and the patch, or None if it failed."""

    sent: float
    seconds: float
    patch: bytes | None


@dataclass
class Rig:
    """The running pieces and what they recorded, each with `time.monotonic()` stamps."""

    plane: ControlPlane
    proxy: SlowProxy
    kubeconfigs: dict[str, Path]
    inventory: NodeInventory
    server: Server
    reviews: list[Review] = field(default_factory=list)
    inventory_log: list[tuple[float, int, str]] = field(default_factory=list)
    labeller_log: list[tuple[float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def core(self) -> client.CoreV1Api:
        """The admin's CoreV1Api, straight to the apiserver, on fresh connections."""
        return client.CoreV1Api(self.plane.api())

    def relabel(self, node: str, labels: dict[str, str | None]) -> None:
        """Merge-patch labels onto a Node as the admin (None removes one)."""
        self.core.patch_node(
            node, {"metadata": {"labels": labels}}, _content_type="application/merge-patch+json"
        )

    def discovered(self, mem: str) -> bool:
        """Whether the inventory has the class of `mem`."""
        return any(p.node_selector.get(MEM) == mem for p in self.inventory.profiles())

    def served_since(self, mem: str, since: float) -> float | None:
        """When the first review sent after `since` that named the class of `mem` ended."""
        needle = f'"{mem}"'.encode()
        for review in self.reviews[:]:
            if review.sent >= since and review.patch is not None and needle in review.patch:
                return review.sent + review.seconds
        return None

    def labelled(self) -> bool:
        """Whether the labeller's Node carries its labels (False while unreadable)."""
        try:
            metadata = self.core.read_node(LABELLED, _request_timeout=5).metadata
        except (client.ApiException, OSError, urllib3.exceptions.HTTPError):
            return False  # the apiserver is down: not seen yet
        found = (metadata.labels if metadata else None) or {}
        return all(found.get(k) == v for k, v in LABELS.items())

    def install_certs(self, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        """`python -m certs install` as the installer account, through the proxy."""
        argv = [sys.executable, "-m", "certs", "install", "--namespace", NAMESPACE]
        argv += ["--service", "lwgpu", "--secret", "lwgpu-tls", "--webhook-config", CONFIG]
        env = dict(
            controlplane.environment(self.plane), KUBECONFIG=str(self.kubeconfigs["installer"])
        )
        return subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )

    def certs_verify(self) -> bool | None:
        """Whether every caBundle of the configuration verifies the serving certificate
        stored (None: no serving Secret)."""
        try:
            secret = self.core.read_namespaced_secret("lwgpu-tls", NAMESPACE)
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise
        cert = x509.load_pem_x509_certificate(base64.b64decode((secret.data or {})["tls.crt"]))
        admission = client.AdmissionregistrationV1Api(self.plane.api())
        hooks = admission.read_mutating_webhook_configuration(CONFIG).webhooks or []
        bundles = [x509.load_pem_x509_certificates(base64.b64decode(h.client_config.ca_bundle))
                   if h.client_config.ca_bundle else [] for h in hooks]  # fmt: skip
        return all(signed_by_any(cert, tuple(b)) for b in bundles)


class _Records(logging.Handler):
    def __init__(self, into: list[tuple[float, int, str]]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def handle(self, record: logging.LogRecord) -> bool:
        self.into.append((time.monotonic(), record.levelno, record.getMessage()))
        return True


def _reviews(rig: Rig) -> None:
    while not rig.stop.wait(REVIEW_EVERY_S):
        began = time.monotonic()
        try:
            status, body = rig.server.review("mutate", REVIEW)
            patch = base64.b64decode(body["response"]["patch"]) if status == 200 else None
        except (OSError, KeyError, TypeError):
            patch = None
        rig.reviews.append(Review(began, time.monotonic() - began, patch))


def _accounts(plane: ControlPlane, proxy: SlowProxy, work: Path) -> dict[str, Path]:
    plane.kubectl("create", "namespace", NAMESPACE)
    kubelet, paths = Kubelet(plane, work), {}
    for name in ACCOUNTS:
        plane.kubectl("create", "serviceaccount", name, "-n", NAMESPACE)
        plane.kubectl(
            "create", "clusterrolebinding", f"faults-{name}", "--clusterrole=cluster-admin",
            f"--serviceaccount={NAMESPACE}:{name}",
        )  # fmt: skip
        direct = kubelet.token_kubeconfig(NAMESPACE, name)
        paths[name] = work / f"{name}.proxied.kubeconfig"
        paths[name].write_text(direct.read_text().replace(plane.server, proxy.url))
    return paths


def _objects(plane: ControlPlane) -> None:
    hook = {
        "name": "h.lwgpu.io",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "lwgpu", "namespace": NAMESPACE, "path": "/mutate"}},
    }
    config = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "MutatingWebhookConfiguration", "metadata": {"name": CONFIG},
              "webhooks": [hook]}  # fmt: skip
    plane.kubectl("create", "-f", "-", input=json.dumps(config))
    for name, labels in ((PROBE, {MEM: "5120MiB"}), (LABELLED, {})):
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        plane.kubectl("create", "-f", "-", input=json.dumps(node))


@contextlib.contextmanager
def rig(work: Path) -> Iterator[Rig]:
    """The control plane and the three clients running, all stopped when the block ends."""
    policy = work / "discovering.yaml"
    shipped = (REPO / "policies" / "default.yaml").read_text()
    policy.write_text(shipped.replace("spec:\n", "spec:\n  discoverProfiles: true\n", 1))
    (work / "server").mkdir()
    with controlplane.running(work / "control-plane") as plane:
        host, port = plane.server.removeprefix("https://").split(":")
        proxy = SlowProxy((host, int(port)))
        kubeconfigs = _accounts(plane, proxy, work)
        _objects(plane)
        core = client.CoreV1Api(api_client(str(kubeconfigs["webhook"])))
        inventory = NodeInventory(core, watch_timeout_s=WATCH_S)
        env = {"KUBECONFIG": str(kubeconfigs["webhook"])}
        with serving(work / "server", policy, env=env) as server:
            made = Rig(plane, proxy, kubeconfigs, inventory, server)
            handler = _Records(made.inventory_log)
            logging.getLogger("webhook.kube.inventory").addHandler(handler)
            logging.getLogger("webhook.kube.inventory").setLevel(logging.DEBUG)
            labelling = client.CoreV1Api(api_client(str(kubeconfigs["labeller"])))
            threads = [
                threading.Thread(target=_reviews, args=(made,), daemon=True),
                threading.Thread(
                    target=labeller.run,
                    args=(
                        labelling,
                        LABELLED,
                        LABELS,
                        LABEL_EVERY_S,
                        made.stop,
                        lambda line: made.labeller_log.append((time.monotonic(), line)),
                    ),
                    daemon=True,
                ),
            ]
            inventory.start()
            for thread in threads:
                thread.start()
            try:
                yield made
            finally:
                made.stop.set()
                inventory.stop()
                for thread in threads:
                    thread.join(30)
                logging.getLogger("webhook.kube.inventory").removeHandler(handler)
                proxy.close()
