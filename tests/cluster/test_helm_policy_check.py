"""`helm install` and `helm upgrade` of the chart with a `policy`, on a control plane of this
module's own: the pre-install,pre-upgrade hook's Job runs `python -m webhook policy check` on
the policy (its pod run by the stand-in kubelet, tools/cluster/kubelet.py), and a policy that
does not load fails the command, with the check's output printed, before anything of the
release is created (or, on an upgrade, changed).

helm prints a failed hook's log (`helm.sh/hook-output-log-policy`) through the apiserver's
`pods/log`, which asks the kubelet of the pod's node. The one Node here stands for that kubelet
with `LogEndpoint`, serving the stand-in's log files at the port and address the Node reports
(kube-apiserver pkg/registry/core/pod/strategy.go, LogLocation; pkg/kubelet/client/
kubelet_client.go, GetConnectionInfo: `status.daemonEndpoints.kubeletEndpoint.Port`, and no
certificate check without --kubelet-certificate-authority, transportConfig).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support import helm
from tests.support.cluster import require_binaries
from tests.support.paths import DEPLOY, EXAMPLE_POLICIES
from tools.cluster import controlplane, fleet, pki
from tools.cluster.controlplane import ControlPlane
from tools.cluster.install import NAMESPACE
from tools.cluster.kubelet import Kubelet
from tools.waiting import wait_for

pytestmark = pytest.mark.cluster
NODE = "hook-node"
CHECK = "app.kubernetes.io/name=lwgpu-policy-check"
GOOD = EXAMPLE_POLICIES / "mixed-fleet.yaml"
# A policy that does not load, and the start of the check's line about it (after the path of
# the file in the pod's volume).
BROKEN = "apiVersion: lwgpu.io/v1\nkind: LightweightGPUPolicy\nmetadata:\n  name: typo\n"
BROKEN_SAYS = "/default.yaml#0: apiVersion/kind: must be lwgpu.io/v1alpha1 LightweightGPUPolicy"
HOOK_FAILED = "1 error occurred:\n\t* job lwgpu-policy-check failed: BackoffLimitExceeded"


class LogEndpoint(ThreadingHTTPServer):
    """The kubelet's `/containerLogs/<namespace>/<pod>/<container>` over HTTPS, answered with
    the stand-in kubelet's log file of that container."""

    def __init__(self, kubelet: Kubelet, pki_dir: Path) -> None:
        super().__init__(("127.0.0.1", 0), _LogHandler)
        self.kubelet = kubelet
        pki_dir.mkdir(parents=True, exist_ok=True)
        cert, key = pki.Authority(pki_dir).issue("kubelet", NODE, ips=("127.0.0.1",))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.socket = context.wrap_socket(self.socket, server_side=True)


class _LogHandler(BaseHTTPRequestHandler):
    server: LogEndpoint

    def do_GET(self) -> None:
        parts = self.path.split("?")[0].strip("/").split("/")
        log = self.server.kubelet.dir / f"{parts[-2]}.{parts[-1]}.log"
        if parts[0] != "containerLogs" or len(parts) != 4 or not log.is_file():
            self.send_error(404)
            return
        body = log.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test asserts what helm printed."""


@dataclass
class Cluster:
    """The control plane, its one Node's stand-in kubelet, and where files go."""

    plane: ControlPlane
    kubelet: Kubelet
    dir: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_binaries()
    try:
        helm.helm_binary()
    except helm.HelmUnavailable as exc:
        pytest.skip(f"no helm: {exc}")
    workdir = tmp_path_factory.mktemp("helm-check")
    with controlplane.running(workdir / "plane") as plane:
        kubelet = Kubelet(plane, workdir / "pods")
        endpoint = LogEndpoint(kubelet, workdir / "kubelet-pki")
        threading.Thread(target=endpoint.serve_forever, daemon=True).start()
        status = fleet.status({})
        status["addresses"] = [{"type": "InternalIP", "address": "127.0.0.1"}]
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": endpoint.server_address[1]}}
        plane.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
        }))  # fmt: skip
        kubelet.core.patch_node_status(NODE, {"status": status})
        plane.kubectl("create", "-f", str(DEPLOY / "base" / "namespace.yaml"))
        try:
            yield Cluster(plane, kubelet, workdir)
        finally:
            endpoint.shutdown()
            kubelet.close()


def _check_pod(plane: ControlPlane) -> dict | None:
    """The hook Job's pod once kube-scheduler bound it, not yet run."""
    got = plane.kubectl("get", "pods", "-n", NAMESPACE, "-l", CHECK, "-o", "json")
    pods = [
        p
        for p in json.loads(got.stdout)["items"]
        if p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and p["status"].get("phase") == "Pending"
    ]
    return pods[0] if pods else None


def helm_with_check(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `helm <args>` against the cluster, and the hook's pod when the Job makes it: the
    stand-in kubelet runs it to its end and reports the pod Succeeded or Failed by its exit."""
    argv = [
        str(helm.helm_binary()), *args, "--namespace", NAMESPACE, *helm.REQUIRED,
        "--kubeconfig", str(cluster.plane.kubeconfig), "--timeout", "2m",
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pod = wait_for(partial(_check_pod, cluster.plane), timeout=60, what="the check's pod")
        running = cluster.kubelet.run(pod)
        phase = "Succeeded" if running.process.wait(60) == 0 else "Failed"
        cluster.kubelet.core.patch_namespaced_pod_status(
            running.name, NAMESPACE, {"status": {"phase": phase}}
        )
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def _release_objects(plane: ControlPlane, release: str) -> list[str]:
    """kind/name of the objects of `release` (Helm labels them with its name), namespaced and
    cluster-scoped."""
    kinds = "deployments,services,configmaps,jobs,cronjobs,serviceaccounts,networkpolicies"
    namespaced = plane.kubectl(
        "get", kinds, "-n", NAMESPACE, "-l", f"app.kubernetes.io/instance={release}", "-o", "name"
    )
    cluster_wide = plane.kubectl(
        "get", "mutatingwebhookconfigurations,validatingadmissionpolicies,clusterroles",
        "-l", f"app.kubernetes.io/instance={release}", "-o", "name",
    )  # fmt: skip
    return (namespaced.stdout + cluster_wide.stdout).split()


def _check_objects(plane: ControlPlane) -> str:
    """The hook's Job and ConfigMap, where they are still there."""
    return plane.kubectl(
        "get", "job/lwgpu-policy-check", "configmap/lwgpu-policy-check", "-n", NAMESPACE,
        "--ignore-not-found", "-o", "name",
    ).stdout  # fmt: skip


def _served_policy(plane: ControlPlane) -> str:
    got = plane.kubectl("get", "configmap", "lwgpu-policies", "-n", NAMESPACE, "-o", "json")
    policy: str = json.loads(got.stdout)["data"]["default.yaml"]
    return policy


def test_a_policy_that_does_not_load_fails_the_install_before_anything_is_created(cluster):
    broken = cluster.dir / "broken.yaml"
    broken.write_text(BROKEN)

    done = helm_with_check(
        cluster, "install", "broken", str(helm.CHART), "--set-file", f"policy={broken}"
    )

    assert done.returncode == 1
    assert BROKEN_SAYS in done.stderr  # the check's output, which helm fetched and printed
    assert done.stderr.rstrip().endswith(
        f"Error: INSTALLATION FAILED: failed pre-install: {HOOK_FAILED}"
    )
    assert _release_objects(cluster.plane, "broken") == []
    assert _check_objects(cluster.plane) == ""  # hook-failed: deleted, its log printed first


def test_a_policy_that_loads_installs_and_a_broken_upgrade_changes_nothing(cluster):
    done = helm_with_check(
        cluster, "install", "lwgpu", str(helm.CHART), "--set-file", f"policy={GOOD}"
    )

    assert done.returncode == 0, done.stderr
    assert "ConfigMap lwgpu-policies" in done.stdout  # NOTES.txt
    assert "your `policy` value, which the pre-install check loaded" in done.stdout
    assert f"kubectl -n {NAMESPACE} rollout status deployment/lwgpu-webhook" in done.stdout
    assert "deployment.apps/lwgpu-webhook" in _release_objects(cluster.plane, "lwgpu")
    assert _served_policy(cluster.plane) == GOOD.read_text(encoding="utf-8")
    assert _check_objects(cluster.plane) == ""  # hook-succeeded

    broken = cluster.dir / "broken-upgrade.yaml"
    broken.write_text(BROKEN)
    done = helm_with_check(
        cluster, "upgrade", "lwgpu", str(helm.CHART), "--set-file", f"policy={broken}"
    )

    assert done.returncode == 1
    assert BROKEN_SAYS in done.stderr
    assert f"Error: UPGRADE FAILED: pre-upgrade hooks failed: {HOOK_FAILED}" in done.stderr
    assert _served_policy(cluster.plane) == GOOD.read_text(encoding="utf-8")
