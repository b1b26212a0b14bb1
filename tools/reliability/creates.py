"""A steady stream of GPU-memory pod creates through kube-apiserver, each one counted.

The pod is the one the seed's `cuda-sample` Deployment makes (`aliyun.com/gpu-mem: 2`,
examples/cuda-sample-gpu-mem.yaml), created with a server-side dry run (`dryRun=All`): the
apiserver runs all of admission, lwgpu's mutating webhook through its Service and then the
final-state ValidatingAdmissionPolicy, and stores nothing. Creates are sent open-loop at a
fixed rate (create i is due at start + i / rate, whatever the earlier ones took) by a pool
of threads, each keeping one HTTPS connection to the apiserver alive, as the admin.

Each create becomes a `Create`: refused or failed (no 201: the final-state check's refusal
of a pod the webhook did not rewrite, a timeout, a dropped connection), or admitted, and then
rewritten or not (the object the apiserver answered still asks GPU memory, or lacks the
`aliyun.accelerator/nvidia_mem` node selector). The stream ends after its count, or at
`stop()`.
"""

from __future__ import annotations

import http.client
import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import urlsplit

import orjson

from tools.bench.bodies import seed_deployment
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for

GPU_MEMORY = "aliyun.com/gpu-mem"
CLASS_SELECTOR = "aliyun.accelerator/nvidia_mem"
# The client's patience for one create: the webhook's timeoutSeconds (5) and the rest of
# admission, with room to spare, so that what fails is the apiserver's answer, not ours.
TIMEOUT_S = 30


@dataclass(frozen=True)
class Create:
    """One create as the client saw it: when (time.monotonic()), the HTTP status (None: no
    answer), whether the admitted object was rewritten, the error of a failed one, and the
    class the admitted pod selects (its `aliyun.accelerator/nvidia_mem` node selector)."""

    start: float
    end: float
    status: int | None
    rewritten: bool
    error: str | None
    selector: str | None = None

    @property
    def failed(self) -> bool:
        """Not admitted (no 201 Created)."""
        return self.status != 201

    @property
    def unrewritten(self) -> bool:
        """Admitted, but as asked: still GPU memory, or no class selector."""
        return self.status == 201 and not self.rewritten


def gpu_memory_pod() -> dict[str, Any]:
    """The Pod of the seed's Deployment, as its ReplicaSet would create it."""
    template = seed_deployment()["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "cuda-sample", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }


def rewritten(pod: dict[str, Any]) -> bool:
    """True when no container asks GPU memory and the pod selects a class of node."""
    spec = pod["spec"]
    containers = spec.get("containers", []) + spec.get("initContainers", [])
    asks = [
        (c.get("resources") or {}).get(kind) or {}
        for c in containers
        for kind in ("limits", "requests")
    ]
    return all(GPU_MEMORY not in ask for ask in asks) and CLASS_SELECTOR in (
        spec.get("nodeSelector") or {}
    )


class CreateStream:
    """`rate` creates a second until `count` were sent; a context manager that runs it."""

    def __init__(
        self, plane: ControlPlane, namespace: str, rate: float, count: int, threads: int = 16
    ) -> None:
        """Plan the stream; nothing is sent before `__enter__`."""
        self.plane, self.rate, self.count = plane, rate, count
        self.path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
        self.body = orjson.dumps(gpu_memory_pod())
        self.records: list[Create] = []  # list.append is atomic: threads share it safely
        self.late = 0  # creates sent more than a second after they were due
        self._next = itertools.count()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, daemon=True) for _ in range(threads)]
        self.began = 0.0

    def __enter__(self) -> Self:
        self.began = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self._stop.set()
        for thread in self._threads:
            thread.join()

    def achieved(self) -> float:
        """Creates sent a second, from the first to the last."""
        starts = [r.start for r in self.records]
        return (len(starts) - 1) / (max(starts) - min(starts)) if len(starts) > 1 else 0.0

    def stop(self) -> None:
        """Send no more creates (those on their way are still counted)."""
        self._stop.set()

    def wait_sent(self, count: int) -> None:
        """Return once `count` creates were answered (or failed)."""
        timeout = count / self.rate + 60
        wait_for(lambda: len(self.records) >= count, timeout, what=f"{count} creates")

    def _connection(self) -> http.client.HTTPSConnection:
        url = urlsplit(self.plane.server)
        assert url.hostname is not None and url.port is not None
        return http.client.HTTPSConnection(
            url.hostname, url.port, context=self.plane.admin_tls(), timeout=TIMEOUT_S
        )

    def _send(self) -> None:
        conn = self._connection()
        while not self._stop.is_set():
            number = next(self._next)
            if number >= self.count:
                break
            due = self.began + number / self.rate
            if self._stop.wait(max(0.0, due - time.monotonic())):
                break
            start = time.monotonic()
            if start - due > 1:
                self.late += 1
            status, admitted, error, selector = None, False, None, None
            try:
                conn.request("POST", self.path, self.body, {"Content-Type": "application/json"})
                answer = conn.getresponse()
                status, data = answer.status, answer.read()
                if status == 201:
                    pod = orjson.loads(data)
                    admitted = rewritten(pod)
                    selector = (pod["spec"].get("nodeSelector") or {}).get(CLASS_SELECTOR)
                else:
                    error = orjson.loads(data).get("message", "")
            except (OSError, http.client.HTTPException, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                conn.close()
                conn = self._connection()
            self.records.append(Create(start, time.monotonic(), status, admitted, error, selector))
        conn.close()
