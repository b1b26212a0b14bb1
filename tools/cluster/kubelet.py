"""Stands in for kubelet, for lwgpu's own pods only: runs a bound pod's containers from the
checkout as local processes on an address of the pod's own, and reports the pod's status.

Nothing here runs containers. For a pod that kube-scheduler bound, `Kubelet.run` does what
kubelet's pod workers do in the part lwgpu depends on: it materialises the pod's Secret,
ConfigMap and emptyDir volumes as directories (shared by its containers, as in a pod; only
the keys a volume's `items` list, where it lists any), starts each container's `command` +
`args` as a process of its own, logging to a file of its own (`python` is this interpreter;
paths under a volume's `mountPath` point at its directory; `--host 0.0.0.0` listens on the
pod's address), all with the pod's ServiceAccount token in a kubeconfig: the webhook's pod
runs the server and the policy-sync sidecar. Once the first container answers its readiness
probe it posts the status kubelet's status manager would
(`pkg/kubelet/status/status_manager.go`): phase Running, `podIP`, and the `Ready` and
`ContainersReady` conditions, which the EndpointSlice controller turns into a ready endpoint
of the Service. Pod addresses are added to `lo` (Endpoints refuse loopback 127.0.0.0/8) and
removed at `close`.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tools.cluster import processes, volumes
from tools.cluster.controlplane import ControlPlane, ControlPlaneError

REPO = Path(__file__).resolve().parents[2]
# Pod addresses: the first of 10.97.0.0/16 that `ip addr add` can add is this kubelet's, so
# concurrent test sessions (and addresses a killed run left behind) never share one.
POD_NETWORK = "10.97.0.0/16"
READY_TIMEOUT_S = 60


@dataclass
class RunningContainer:
    """One container of a pod, as a process, the file its output goes to, and when it was
    started (`time.time()`, to set against the timestamps of its log)."""

    name: str
    image: str
    process: subprocess.Popen[bytes]
    log: Path
    started: float


@dataclass
class RunningPod:
    """A pod this kubelet runs: its name, address, containers and volume directories."""

    namespace: str
    name: str
    address: str
    containers: list[RunningContainer]
    volumes: dict[str, Path]

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The first container's process (the one probed: the webhook's server)."""
        return self.containers[0].process

    @property
    def log(self) -> Path:
        """The first container's log."""
        return self.containers[0].log


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


class Kubelet:
    """Runs pods of the cluster as local processes; `close` stops them all."""

    def __init__(self, plane: ControlPlane, workdir: Path) -> None:
        self.plane = plane
        self.dir = workdir
        self.core = client.CoreV1Api(plane.api())
        self.pods: dict[str, RunningPod] = {}
        self.addresses: list[str] = []

    def _address(self) -> str:
        for host in ipaddress.ip_network(POD_NETWORK).hosts():
            address = str(host)
            added = _ip("addr", "add", f"{address}/32", "dev", "lo")
            if not added.returncode:
                self.addresses.append(address)
                return address
            if not any(taken in added.stderr for taken in ("File exists", "already assigned")):
                raise ControlPlaneError(f"cannot add {address} to lo: {added.stderr.strip()}")
        raise ControlPlaneError(f"no free address left in {POD_NETWORK}")

    def token_kubeconfig(self, namespace: str, service_account: str) -> Path:
        """A kubeconfig that authenticates as `service_account` with a requested token."""
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600 * 6)
        )
        answer = self.core.create_namespaced_service_account_token(
            service_account, namespace, request
        )
        assert answer.status is not None, "a TokenRequest is answered with a status"
        path = self.dir / f"{namespace}.{service_account}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "cluster",
                    "cluster": {
                        "server": self.plane.server,
                        "certificate-authority": str(self.plane.ca),
                    },
                }
            ],
            "users": [{"name": service_account, "user": {"token": answer.status.token}}],
            "contexts": [
                {"name": "sa", "context": {"cluster": "cluster", "user": service_account}}
            ],
            "current-context": "sa",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def _volume(self, namespace: str, volume: dict[str, Any], where: Path) -> None:
        if "emptyDir" in volume or "projected" in volume:
            # The projected service-account volume is not written: the container gets its
            # token through KUBECONFIG (`token_kubeconfig`), as in-cluster config needs a fixed
            # path and KUBERNETES_SERVICE_HOST.
            where.mkdir(parents=True, exist_ok=True)
            return
        files: dict[str, bytes] = {}
        if "secret" in volume:
            source = volume["secret"]
            secret = self.core.read_namespaced_secret(source["secretName"], namespace)
            files = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
        elif "configMap" in volume:
            source = volume["configMap"]
            config_map = self.core.read_namespaced_config_map(source["name"], namespace)
            files = {k: v.encode() for k, v in (config_map.data or {}).items()}
        else:
            raise ControlPlaneError(
                f"volume {volume['name']}: only Secret, ConfigMap, emptyDir, projected"
            )
        if "items" in source:
            # Only the keys listed, each at its path; a listed key that is missing fails the
            # mount, as kubelet's MakePayload does (pkg/volume/secret/secret.go).
            absent = [item["key"] for item in source["items"] if item["key"] not in files]
            if absent:
                raise ControlPlaneError(f"volume {volume['name']}: no key {', '.join(absent)}")
            files = {item["path"]: files[item["key"]] for item in source["items"]}
        volumes.atomic_write(where, files, source.get("defaultMode", volumes.DEFAULT_MODE))

    def sync_volumes(self, name: str) -> None:
        """Bring a running pod's Secret and ConfigMap volumes up to date, as kubelet's
        periodic sync does after their source changed."""
        running = self.pods[name]
        pod = self.core.api_client.sanitize_for_serialization(
            self.core.read_namespaced_pod(name, running.namespace)
        )
        for volume in pod["spec"]["volumes"]:
            self._volume(running.namespace, volume, running.volumes[volume["name"]])

    def run(self, pod: dict[str, Any]) -> RunningPod:
        """Start every container of a bound pod (a `kubectl get pod -o json` object)."""
        meta, spec = pod["metadata"], pod["spec"]
        namespace, name = meta["namespace"], meta["name"]
        root = self.dir / name
        volumes = {}
        for volume in spec.get("volumes", []):
            volumes[volume["name"]] = root / volume["name"]
            self._volume(namespace, volume, volumes[volume["name"]])
        earlier = self.pods.get(name)
        address = earlier.address if earlier else self._address()
        kubeconfig = self.token_kubeconfig(namespace, spec.get("serviceAccountName", "default"))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KUBE")},
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": str(REPO),
        }
        containers = []
        for container in spec["containers"]:
            log = self.dir / f"{name}.{container['name']}.log"
            argv = _argv(container, volumes, address)
            began = time.time()
            process = processes.start(argv, log, env=env)
            containers.append(
                RunningContainer(container["name"], container["image"], process, log, began)
            )
        running = RunningPod(namespace, name, address, containers, volumes)
        self.pods[name] = running
        return running

    def wait_ready(self, running: RunningPod, ca: Path, port: int, path: str = "/readyz") -> None:
        """Probe the container over HTTPS like its readiness probe, then report it Ready."""
        context = ssl.create_default_context(cafile=str(ca))
        context.check_hostname = False
        deadline = time.monotonic() + READY_TIMEOUT_S
        url = f"https://{running.address}:{port}{path}"
        while True:
            if running.process.poll() is not None:
                raise ControlPlaneError(
                    f"{running.name} exited with {running.process.returncode}:\n"
                    + processes.tail(running.log)
                )
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(url, context=context, timeout=2) as answer,
            ):
                if answer.status == 200:
                    break
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{url}: not ready\n{processes.tail(running.log)}")
            time.sleep(0.1)
        self.report(running, ready=True)

    def report(self, running: RunningPod, ready: bool) -> None:
        """Post the pod's status as kubelet's status manager would."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        flag = "True" if ready else "False"
        status = {
            "phase": "Running",
            "podIP": running.address,
            "podIPs": [{"ip": running.address}],
            "hostIP": running.address,
            "startTime": now,
            "conditions": [
                {"type": kind, "status": flag, "lastTransitionTime": now}
                for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": container.name,
                    "image": container.image,
                    "imageID": "",
                    "ready": ready,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": now}},
                }
                for container in running.containers
            ],
        }
        self.core.patch_namespaced_pod_status(running.name, running.namespace, {"status": status})

    def stop(self, name: str) -> None:
        """Stop one pod's processes (its status is left as it was, as when a node dies)."""
        for container in self.pods[name].containers:
            processes.stop(container.process)

    def close(self) -> None:
        """Stop every pod and remove the addresses this kubelet added."""
        for name in self.pods:
            self.stop(name)
        for address in self.addresses:
            _ip("addr", "del", f"{address}/32", "dev", "lo")


def _argv(container: dict[str, Any], volumes: dict[str, Path], address: str) -> list[str]:
    """The container's command line for this machine: this Python for `python`, the pod's
    address for 0.0.0.0, and a volume's directory for a path under its mount."""
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}
    argv = []
    for word in [*container.get("command", []), *container.get("args", [])]:
        argv.append({"python": sys.executable, "0.0.0.0": address}.get(word, word))
        for mount_path in sorted(mounts, key=len, reverse=True):
            if word == mount_path or word.startswith(mount_path + "/"):
                argv[-1] = str(mounts[mount_path]) + word[len(mount_path) :]
                break
    return argv
