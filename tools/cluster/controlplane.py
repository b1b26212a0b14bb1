"""etcd, kube-apiserver, kube-controller-manager and kube-scheduler, started on free loopback
ports in one directory and stopped on any exit.

The flags are those of a small real cluster with two differences that no kubelet makes
necessary: the node lifecycle controller is off (it would taint Nodes whose kubelet never
posts a heartbeat) and so is the TaintNodesByCondition admission plugin (it taints new Nodes
`not-ready` until a kubelet reports). `--enable-aggregator-routing` makes kube-apiserver reach
a webhook's `clientConfig.service` through the Service's ready endpoints
(`staging/src/k8s.io/kube-aggregator/pkg/apiserver/resolvers.go`, `NewEndpointServiceResolver`)
instead of cluster DNS, which nothing here serves, so the shipped webhook configuration works
unchanged. `--endpoint-reconciler-type=none` keeps the `kubernetes` Service's endpoints out of
it (the apiserver listens on loopback only). The apiserver writes an audit log (`audit.log`,
one JSON event a line) of pod creations only, at Metadata level: what the admission webhooks'
audit annotations are checked against, at the cost of one line per pod.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from tools.cluster import binaries, pki, processes

SERVICE_RANGE = "10.96.0.0/16"
START_TIMEOUT_S = 90
# audit.k8s.io/v1 Policy: the first matching rule sets the level; Metadata carries the
# admission audit annotations (staging/src/k8s.io/apiserver/pkg/admission/attributes.go,
# `AddAnnotation`). Everything else is not logged.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create"],
            "resources": [{"group": "", "resources": ["pods"]}],
        },
        {"level": "None"},
    ],
}


class ControlPlaneError(RuntimeError):
    """A component did not start or did not become ready; the message quotes its log."""


@dataclass
class ControlPlane:
    """A running control plane: where it listens, how to reach it, its processes."""

    dir: Path
    server: str
    kubeconfig: Path
    ca: Path
    argv: dict[str, list[str]] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster; raises with its stderr when `check`."""
        argv = [str(binaries.path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args]
        done = subprocess.run(argv, input=input, capture_output=True, text=True, check=False)
        if check and done.returncode:
            raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
        return done

    def api(self) -> client.ApiClient:
        """A `kubernetes` client authenticated as the cluster's admin."""
        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]  # kubernetes.config is untyped
            config_file=str(self.kubeconfig), client_configuration=configuration
        )
        return client.ApiClient(configuration)

    @property
    def audit_log(self) -> Path:
        """The apiserver's audit log: an `audit.k8s.io/v1` Event per line (`AUDIT_POLICY`)."""
        return self.dir / "audit.log"

    def log(self, name: str) -> Path:
        """A component's log file."""
        return self.dir / f"{name}.log"

    def start(self, name: str) -> None:
        """(Re)start one component with the arguments it first ran with."""
        self.procs[name] = processes.start(self.argv[name], self.log(name))

    def stop(self, name: str) -> None:
        """Stop one component (the others keep running)."""
        processes.stop(self.procs[name])

    def restart_apiserver(self, *flags: str) -> None:
        """Stop kube-apiserver, start it again with the arguments it first ran with and
        `flags` (for this run only; a later restart drops them), and wait until it is ready."""
        name = "kube-apiserver"
        self.stop(name)
        self.procs[name] = processes.start([*self.argv[name], *flags], self.log(name))
        self._wait_ready()

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision, as kube-apiserver's own compactor
        does every `--etcd-compaction-interval` (staging/src/k8s.io/apiserver/pkg/storage/
        etcd3/compact.go), through etcd's v3 JSON gateway; returns that revision."""
        url = next(
            a.split("=", 1)[1] for a in self.argv["etcd"] if a.startswith("--listen-client-urls=")
        )

        def post(path: str, body: dict[str, object]) -> dict[str, Any]:
            request = urllib.request.Request(url + path, json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(request, timeout=10) as answer:
                parsed: dict[str, Any] = json.loads(answer.read())
                return parsed

        revision = int(post("/v3/kv/range", {"key": "Lw=="})["header"]["revision"])  # "/"
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def admin_tls(self) -> ssl.SSLContext:
        """A TLS context that trusts the cluster's CA and presents the admin's certificate."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(self.dir / "admin.crt", self.dir / "admin.key")
        return context

    def get(self, path: str) -> tuple[int, bytes]:
        """GET a path of the apiserver as the admin: status and body (no exception on 4xx)."""
        try:
            with urllib.request.urlopen(
                self.server + path, context=self.admin_tls(), timeout=5
            ) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def _alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with {proc.returncode}:\n{processes.tail(self.log(name))}"
                )

    def _await(self, check: str, probe: object) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self._alive()
            with contextlib.suppress(OSError):
                if probe():  # type: ignore[operator]
                    return
            time.sleep(0.1)
        raise ControlPlaneError(
            f"{check}: not after {START_TIMEOUT_S} s\n{processes.tail(self.log('kube-apiserver'))}"
        )

    def _wait_ready(self) -> None:
        self._await("kube-apiserver /readyz", lambda: self.get("/readyz")[0] == 200)

    def wait_default_service_account(self) -> None:
        """The controller manager is working once it created `default/default`."""
        path = "/api/v1/namespaces/default/serviceaccounts/default"
        self._await("the default ServiceAccount", lambda: self.get(path)[0] == 200)


def _kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "lwgpu-test", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "lwgpu-test", "context": {"cluster": "lwgpu-test", "user": user}}],
        "current-context": "lwgpu-test",
    }
    path.write_text(yaml.safe_dump(config))


def _argv(
    directory: Path, etcd_port: int, api_port: int, kubeconfigs: dict[str, Path]
) -> dict[str, list[str]]:
    d, bin = directory, binaries.path
    peer = processes.free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    return {
        "etcd": [
            str(bin("etcd")),
            "--name=lwgpu",
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=lwgpu=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(bin("kube-apiserver")),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={d / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--authorization-mode=Node,RBAC",
            "--endpoint-reconciler-type=none",
            "--disable-admission-plugins=TaintNodesByCondition",
            "--enable-aggregator-routing=true",
            "--allow-privileged=true",
            "--profiling=false",
            f"--audit-policy-file={d / 'audit-policy.yaml'}",
            f"--audit-log-path={d / 'audit.log'}",
        ],
        "kube-controller-manager": [
            str(bin("kube-controller-manager")),
            f"--kubeconfig={kubeconfigs['kube-controller-manager']}",
            f"--authentication-kubeconfig={kubeconfigs['kube-controller-manager']}",
            f"--authorization-kubeconfig={kubeconfigs['kube-controller-manager']}",
            "--controllers=*,-node-lifecycle-controller",
            "--leader-elect=false",
            f"--service-account-private-key-file={d / 'sa.key'}",
            f"--root-ca-file={d / 'ca.crt'}",
            "--use-service-account-credentials=true",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--bind-address=127.0.0.1",
            f"--secure-port={processes.free_port()}",
            "--profiling=false",
        ],
        "kube-scheduler": [
            str(bin("kube-scheduler")),
            f"--kubeconfig={kubeconfigs['kube-scheduler']}",
            f"--authentication-kubeconfig={kubeconfigs['kube-scheduler']}",
            f"--authorization-kubeconfig={kubeconfigs['kube-scheduler']}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={processes.free_port()}",
            "--profiling=false",
        ],
    }


@contextlib.contextmanager
def running(directory: Path) -> Iterator[ControlPlane]:
    """Start the control plane in `directory`; stop every component when the block ends."""
    if absent := binaries.missing():
        raise ControlPlaneError(f"not built: {', '.join(absent)}; {binaries.HOW_TO_BUILD}")
    directory.mkdir(parents=True, exist_ok=True)
    ca = pki.Authority(directory)
    ca.issue("apiserver", "kube-apiserver", dns=pki.APISERVER_NAMES, ips=pki.APISERVER_IPS)
    pki.service_account_keys(directory)
    (directory / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
    api_port = processes.free_port()
    server = f"https://127.0.0.1:{api_port}"
    kubeconfigs = {}
    for user, group in (
        ("admin", "system:masters"),
        ("kube-controller-manager", None),
        ("kube-scheduler", None),
    ):
        name = user if group else f"system:{user}"
        cert, key = ca.issue(user, name, organization=group)
        kubeconfigs[user] = directory / f"{user}.kubeconfig"
        _kubeconfig(kubeconfigs[user], server, ca.cert_path, cert, key, user)
    plane = ControlPlane(directory, server, kubeconfigs["admin"], ca.cert_path)
    plane.argv = _argv(directory, processes.free_port(), api_port, kubeconfigs)
    try:
        for name in plane.argv:
            plane.start(name)
            if name == "kube-apiserver":
                plane._wait_ready()
        plane.wait_default_service_account()
        yield plane
    finally:
        for name in reversed(list(plane.procs)):
            processes.stop(plane.procs[name])


def environment(plane: ControlPlane) -> dict[str, str]:
    """The environment a child process (the webhook, `python -m certs`) needs to reach it."""
    return dict(os.environ, KUBECONFIG=str(plane.kubeconfig))
