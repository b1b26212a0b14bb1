"""Stands in for kubelet, for lwgpu's own pods only: runs a bound pod's container from the
checkout as a local process on an address of the pod's own, and reports the pod's status.

Nothing here runs containers. For a pod that kube-scheduler bound, `Kubelet.run` does what
kubelet's pod workers do in the part lwgpu depends on: it materialises the pod's Secret,
ConfigMap and emptyDir volumes as directories, starts the container's `command` + `args`
(`python` is this interpreter; paths under a volume's `mountPath` point at its directory;
`--host 0.0.0.0` listens on the pod's address) with the pod's ServiceAccount token in a
kubeconfig, and once the container answers its readiness probe posts the status kubelet's
status manager would (`pkg/kubelet/status/status_manager.go`): phase Running, `podIP`, and
the `Ready` and `ContainersReady` conditions, which the EndpointSlice controller turns into a
ready endpoint of the Service. Pod addresses are added to `lo` (Endpoints refuse loopback
127.0.0.0/8) and removed at `close`.
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
class RunningPod:
    """A pod this kubelet runs: its name, address, process and volume directories."""

    namespace: str
    name: str
    address: str
    container: str
    image: str
    process: subprocess.Popen[bytes]
    volumes: dict[str, Path]
    log: Path


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

    def run(self, pod: dict[str, Any], container: int = 0) -> RunningPod:
        """Start one container of a bound pod (a `kubectl get pod -o json` object)."""
        meta, spec = pod["metadata"], pod["spec"]
        namespace, name = meta["namespace"], meta["name"]
        root = self.dir / name
        volumes = {}
        for volume in spec.get("volumes", []):
            volumes[volume["name"]] = root / volume["name"]
            self._volume(namespace, volume, volumes[volume["name"]])
        main = spec["containers"][container]
        mounts = {m["mountPath"]: volumes[m["name"]] for m in main.get("volumeMounts", [])}
        earlier = self.pods.get(name)
        address = earlier.address if earlier else self._address()
        argv = []
        for word in [*main.get("command", []), *main.get("args", [])]:
            argv.append({"python": sys.executable, "0.0.0.0": address}.get(word, word))
            for mount_path in sorted(mounts, key=len, reverse=True):
                if word == mount_path or word.startswith(mount_path + "/"):
                    argv[-1] = str(mounts[mount_path]) + word[len(mount_path) :]
                    break
        kubeconfig = self.token_kubeconfig(namespace, spec.get("serviceAccountName", "default"))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KUBE")},
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": str(REPO),
        }
        log = self.dir / f"{name}.log"
        process = processes.start(argv, log, env=env)
        running = RunningPod(
            namespace, name, address, main["name"], main["image"], process, volumes, log
        )
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
                    "name": running.container,
                    "image": running.image,
                    "imageID": "",
                    "ready": ready,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        self.core.patch_namespaced_pod_status(running.name, running.namespace, {"status": status})

    def stop(self, name: str) -> None:
        """Stop one pod's process (its status is left as it was, as when a node dies)."""
        processes.stop(self.pods[name].process)

    def close(self) -> None:
        """Stop every pod and remove the addresses this kubelet added."""
        for running in self.pods.values():
            processes.stop(running.process)
        for address in self.addresses:
            _ip("addr", "del", f"{address}/32", "dev", "lo")
