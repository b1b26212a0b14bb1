"""The stand-in kubelet (kubelet.py) following the webhook Deployment's pods while they come
and go: it starts, marks ready and stops the webhook's own pods; no other pod starts.

`PodLifecycle` polls the pods of `app.kubernetes.io/name=lwgpu-webhook` in lwgpu-system
(every 0.2 s, on a thread of its own) and does what kubelet's pod workers do for them:

- a pod bound to a node that is not running yet is started as `Installation.start_webhook`
  starts one (`Kubelet.run`, then `Kubelet.wait_ready`: `Ready` once `/readyz` answers);
- a pod being deleted (`deletionTimestamp` set) is stopped as kubelet's `killContainer`
  does (pkg/kubelet/kuberuntime/kuberuntime_container.go), every container at once
  (`killContainersWithSyncResult`): the grace period is the pod's
  `deletionGracePeriodSeconds` (else `terminationGracePeriodSeconds`,
  `setTerminationGracePeriod`); the container's `preStop` runs first and its whole seconds
  come off the grace period (`executePreStopHook`); at least 2 s remain
  (`minimumGracePeriodInSeconds`, kuberuntime_manager.go); then SIGTERM to the container's
  first process, SIGKILL to all of them when the grace period ends. The pod is reported not
  Ready when its server gets SIGTERM; then its terminal status is posted and the object
  deleted with grace 0 and its UID as precondition, as the status manager does once the
  phase is terminal (pkg/kubelet/status/status_manager.go, `syncPod`, `canBeDeleted`);
- a running pod's Secret and ConfigMap volumes are projected again once a source changed
  (its `resourceVersion` moved), by kubelet's own `AtomicWriter` (`Kubelet.sync_volumes`:
  the `..data` symlink swap of pkg/volume/util/atomic_writer.go, `AtomicWriter.Write`), as
  kubelet's periodic pod sync remounts them (pkg/volume/secret/secret.go, `SetUpAt`;
  `RequiresRemount` is true for Secret and ConfigMap volumes). A source that is missing or
  unreadable leaves the volume as it was, as kubelet's failed `SetUpAt` does, and is tried
  again the next round (`remount_failures` counts those).

What it does not do: run any other pod, restart a container that exits, run liveness
probes, wait kubelet's sync period (1 min, `--sync-frequency`) and its Secret cache before
a remount (here the next round, 0.2 s, projects a change), or probe readiness after a pod
is Ready (kubelet learns that a stopping server is not ready from its next failed probe;
here the status says so at SIGTERM, which changes only the endpoint's `serving` condition:
`ready` is false from the deletion on, endpointslice utils.go `podToEndpoint`). Of the
`preStop` handlers it runs the `sleep` action only, the one the shipped Deployment uses;
another is reported as an error.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tools.cluster import processes
from tools.cluster.controlplane import ControlPlaneError
from tools.cluster.install import NAMESPACE, WEBHOOK_LABEL, WEBHOOK_PORT, Installation
from tools.cluster.kubelet import RunningContainer, RunningPod

POLL_S = 0.2
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={WEBHOOK_LABEL}"
# pkg/kubelet/kuberuntime/kuberuntime_manager.go, minimumGracePeriodInSeconds.
MINIMUM_GRACE_S = 2
# The API's default for a pod that sets no terminationGracePeriodSeconds.
DEFAULT_GRACE_S = 30


class PodLifecycle:
    """Starts and stops the webhook Deployment's pods as they are bound and deleted; a
    context manager (the thread runs inside the block; errors of its work raise at exit)."""

    def __init__(self, installation: Installation) -> None:
        """Follow the pods of `installation`'s webhook (those it runs already are adopted)."""
        self.installation = installation
        self.kubelet = installation.kubelet
        self.core = self.kubelet.core
        # When each pod address's server was sent SIGTERM (time.monotonic()).
        self.sigterm_at: dict[str, float] = {}
        # The exit codes of each stopped pod's containers (a signal N counts 128 + N).
        self.exits: dict[str, list[int]] = {}
        self.errors: list[str] = []
        # The resourceVersions of each running pod's Secret and ConfigMap sources as last
        # projected into its volumes, and when a change was last projected (time.monotonic()).
        self.projected: dict[str, tuple[str | None, ...]] = {}
        self.remounted_at: dict[str, float] = {}
        self.remount_failures = 0
        self._busy: set[str] = set()  # pods being started or stopped
        self._workers: list[threading.Thread] = []
        self._stop = threading.Event()
        self._starting = threading.Event()
        self._starting.set()
        self._ca_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="pod-lifecycle", daemon=True)

    def __enter__(self) -> PodLifecycle:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._starting.set()
        self._thread.join()
        for worker in list(self._workers):
            worker.join()
        if self.errors and exc[0] is None:
            raise RuntimeError("the pod lifecycle failed:\n" + "\n".join(self.errors))

    @contextlib.contextmanager
    def holding_starts(self) -> Iterator[None]:
        """Start no pod inside the block (as a node that is slow to pull an image): pods
        bound meanwhile start when it ends."""
        self._starting.clear()
        try:
            yield
        finally:
            self._starting.set()

    def pods(self) -> list[dict[str, Any]]:
        """The webhook's pods as the API has them now (`kubectl get -o json` items)."""
        status, body = self.installation.plane.get(PODS)
        if status != 200:
            raise OSError(f"listing the webhook's pods: HTTP {status} {body[:200]!r}")
        items: list[dict[str, Any]] = json.loads(body)["items"]
        return items

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._sync()
            except Exception as error:  # reported at exit; the next round tries again
                self._error(f"following pods: {type(error).__name__}: {error}")

    def _error(self, message: str) -> None:
        if message not in self.errors:  # once, not once a round
            self.errors.append(message)

    def _sync(self) -> None:
        versions: dict[tuple[str, str], str | None] = {}  # read once a round
        for pod in self.pods():
            name = pod["metadata"]["name"]
            if name in self._busy:
                continue
            if pod["metadata"].get("deletionTimestamp"):
                self._spawn(name, self._terminate, pod)
            elif name in self.kubelet.pods:
                self._remount(pod, versions)
            elif pod["spec"].get("nodeName") and self._starting.is_set():
                # Read before `run` reads the sources: a change in between is projected next.
                self.projected[name] = self._sources(pod, versions)
                # Started from this thread, which lives as long as the follower: a child's
                # PR_SET_PDEATHSIG (processes.py) fires when the thread that started it ends.
                self._spawn(name, self._wait_ready, self.kubelet.run(pod))

    def _sources(
        self, pod: dict[str, Any], versions: dict[tuple[str, str], str | None]
    ) -> tuple[str | None, ...]:
        """The resourceVersions of the pod's Secret and ConfigMap volume sources (None: the
        source cannot be read)."""
        found = []
        for volume in pod["spec"].get("volumes", []):
            if "secret" in volume:
                key = ("secret", volume["secret"]["secretName"])
            elif "configMap" in volume:
                key = ("config_map", volume["configMap"]["name"])
            else:
                continue
            if key not in versions:
                read = getattr(self.core, f"read_namespaced_{key[0]}")
                try:
                    versions[key] = read(key[1], NAMESPACE).metadata.resource_version
                except ApiException:
                    versions[key] = None
            found.append(versions[key])
        return tuple(found)

    def _remount(self, pod: dict[str, Any], versions: dict[tuple[str, str], str | None]) -> None:
        """Project a running pod's volumes again if a source changed since it was last."""
        name = pod["metadata"]["name"]
        sources = self._sources(pod, versions)
        if self.projected.setdefault(name, sources) == sources:
            return
        try:
            if None in sources:
                raise ControlPlaneError("a source is missing")
            self.kubelet.sync_volumes(name)
        except (ApiException, ControlPlaneError, OSError):
            self.remount_failures += 1  # the volume keeps what it had; tried next round
            return
        self.projected[name] = sources
        self.remounted_at[name] = time.monotonic()

    def _spawn(self, name: str, work: Callable[[Any], None], what: Any) -> None:
        self._busy.add(name)

        def run() -> None:
            try:
                work(what)
            except Exception as error:  # reported at exit: a thread's exception is lost
                self._error(f"{work.__name__} {name}: {type(error).__name__}: {error}")
            finally:
                self._busy.discard(name)

        worker = threading.Thread(target=run, name=f"pod-{name}", daemon=True)
        self._workers.append(worker)
        worker.start()

    def _wait_ready(self, running: RunningPod) -> None:
        with self._ca_lock:  # the caBundle is written to one file
            ca = self.installation.tls_ca
        self.kubelet.wait_ready(running, ca, WEBHOOK_PORT)
        self.installation.webhook.append(running)

    def _terminate(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        running = self.kubelet.pods.get(meta["name"])
        if running is not None:
            grace = meta.get("deletionGracePeriodSeconds")
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
            specs = {c["name"]: c for c in spec["containers"]}
            kills = [
                threading.Thread(target=self._kill, args=(running, c, specs[c.name], grace))
                for c in running.containers
            ]
            for kill in kills:
                kill.start()
            for kill in kills:
                kill.join()
            with contextlib.suppress(ValueError):
                self.installation.webhook.remove(running)
            self._report_terminated(running)
            del self.kubelet.pods[running.name]
        options = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta["uid"])
        )
        with contextlib.suppress(ApiException):  # already gone
            self.core.delete_namespaced_pod(meta["name"], NAMESPACE, body=options)

    def _kill(
        self, pod: RunningPod, container: RunningContainer, spec: dict[str, Any], grace: int
    ) -> None:
        pre_stop = (spec.get("lifecycle") or {}).get("preStop")
        if pre_stop and grace > 0:
            began = time.monotonic()
            try:
                self._pre_stop(pre_stop, grace)
            except ValueError as error:  # kubelet records a FailedPreStopHook and goes on
                self._error(f"{pod.name} {container.name}: {error}")
            grace -= int(time.monotonic() - began)  # whole seconds, as kubelet counts
        grace = max(grace, MINIMUM_GRACE_S)
        if container is pod.containers[0]:  # the server, which the readiness probe asks
            self.sigterm_at[pod.address] = time.monotonic()
            self.kubelet.report(pod, ready=False)
        processes.stop(container.process, grace, whole_group=False)

    def _pre_stop(self, handler: dict[str, Any], grace: int) -> None:
        if set(handler) != {"sleep"}:
            raise ValueError(f"preStop {sorted(handler)}: only the sleep action runs here")
        # Never longer than the grace period (executePreStopHook's time.After).
        self._stop.wait(min(int(handler["sleep"]["seconds"]), grace))

    def _report_terminated(self, pod: RunningPod) -> None:
        returned = [c.process.returncode for c in pod.containers]
        codes = [128 - code if code < 0 else code for code in returned]  # signal N: 128 + N
        self.exits[pod.name] = codes
        status = {
            "phase": "Succeeded" if not any(codes) else "Failed",
            "conditions": [
                {"type": kind, "status": "False"} for kind in ("ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": code,
                            "reason": "Completed" if code == 0 else "Error",
                        }
                    },
                }
                for c, code in zip(pod.containers, codes, strict=True)
            ],
        }
        self.core.patch_namespaced_pod_status(pod.name, pod.namespace, {"status": status})
