"""Endpoint removal that propagates slowly, made on purpose: `LateEndpoints`."""

from __future__ import annotations

import json
import subprocess
import threading
import time

from tools.cluster.controlplane import ControlPlane
from tools.cluster.install import NAMESPACE, WEBHOOK_PORT
from tools.cluster.pod_lifecycle import PodLifecycle

SERVICE = "lwgpu-webhook"
# The Service's slices that the EndpointSlice controller keeps.
SLICES = (
    f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices?labelSelector="
    f"kubernetes.io/service-name={SERVICE},"
    "endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io"
)


class LateEndpoints:
    """A second EndpointSlice of the webhook's Service, managed here: it lists the addresses
    the EndpointSlice controller lists ready, and keeps each one until `late_s` after its
    server got SIGTERM. The apiserver's resolver reads every slice labelled with the
    Service's name, in random order, and dials a ready endpoint of the first one that has the
    port (staging/src/k8s.io/apiserver/pkg/util/proxy/proxy.go, `RandomEndpoint`)."""

    NAME = "lwgpu-webhook-late"

    def __init__(self, plane: ControlPlane, pods: PodLifecycle, late_s: float) -> None:
        """Plan the slice; it exists inside the `with` block."""
        self.plane, self.pods, self.late_s = plane, pods, late_s
        self.listed: set[str] = set()
        self.error: Exception | None = None  # the last the thread met
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)

    def __enter__(self) -> LateEndpoints:
        self._write(self._controllers())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.plane.kubectl("delete", "endpointslice", self.NAME, "-n", NAMESPACE)
        if self.error is not None and exc[0] is None:
            raise self.error

    def _controllers(self) -> set[str]:
        status, body = self.plane.get(SLICES)
        if status != 200:
            raise OSError(f"listing the Service's EndpointSlices: HTTP {status}")
        return {
            e["addresses"][0]
            for s in json.loads(body)["items"]
            for e in s.get("endpoints") or []
            if e["conditions"].get("ready")
        }

    def _follow(self) -> None:
        while not self._stop.wait(0.1):
            now = time.monotonic()
            gone = {a for a, t in self.pods.sigterm_at.items() if now - t >= self.late_s}
            try:
                listed = (self.listed | self._controllers()) - gone
                if listed != self.listed:
                    self._write(listed)
            except (OSError, subprocess.CalledProcessError) as error:  # raised at exit
                self.error = error

    def _write(self, addresses: set[str]) -> None:
        body = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": self.NAME,
                "namespace": NAMESPACE,
                "labels": {
                    "kubernetes.io/service-name": SERVICE,
                    "endpointslice.kubernetes.io/managed-by": "rollout.lwgpu.test",
                },
            },
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": WEBHOOK_PORT, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": [a], "conditions": {"ready": True}} for a in sorted(addresses)
            ],
        }
        self.plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(body))
        self.listed = addresses
