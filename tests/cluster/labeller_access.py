"""Acting as the node labeller on the real control plane: its ServiceAccount's pod-bound token
in a kubeconfig of its own, and kubectl run with it (tests/cluster/test_labeller_confinement.py).

A labeller pod is one of the DaemonSet's template bound to a node; `kubectl create token
--bound-object-kind Pod` gets the token kubelet would mount in it, which names that node.
Commands and messages are written with placeholders for the test's nodes (A, its own; B,
another) and B's uid, filled in when they run.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tools.cluster import binaries, install
from tools.cluster.controlplane import ControlPlane

NS = install.NAMESPACE
ACCOUNT = "lwgpu-labeller"
POLICY = "lwgpu-labeller-own-node"
DENIED = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
A, B, B_UID = "NODE_A", "NODE_B", "UID_B"


def apply(plane: ControlPlane, objects: list[dict]) -> None:
    """Apply objects as `kubectl apply --server-side -k deploy/` applies the install."""
    plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objects))


def token_kubeconfig(plane: ControlPlane, token: str, path: Path) -> Path:
    """A kubeconfig with only the bearer token (no admin certificate, which would win), written
    by kubectl's own `config` commands."""
    for args in (
        ["set-cluster", "c", "--server", plane.server, "--certificate-authority", str(plane.ca)],
        ["set-credentials", ACCOUNT, "--token", token],
        ["set-context", "c", "--cluster", "c", "--user", ACCOUNT],
        ["use-context", "c"],
    ):
        subprocess.run(
            [str(binaries.path("kubectl")), "config", f"--kubeconfig={path}", *args],
            check=True,
            capture_output=True,
            timeout=30,
        )
    return path


@dataclass
class Labeller:
    """The labeller's identity: a token in a kubeconfig, and nodes A (its own) and B."""

    plane: ControlPlane
    kubeconfig: Path
    node: str
    other: str

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """The real kubectl with the labeller's token; node names and B's uid filled in."""
        if any(B_UID in arg for arg in args):
            uid = self.stored(self.other)["metadata"]["uid"]
            args = tuple(arg.replace(B_UID, uid) for arg in args)
        filled = [arg.replace(A, self.node).replace(B, self.other) for arg in args]
        argv = [str(binaries.path("kubectl")), f"--kubeconfig={self.kubeconfig}", *filled]
        return subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=60, check=False
        )

    def says(self, message: str) -> str:
        """A message written with the placeholders, the node names filled in."""
        return message.replace(A, self.node).replace(B, self.other)

    def stored(self, name: str) -> dict:
        """A Node as stored, read by the admin."""
        node: dict = json.loads(self.plane.kubectl("get", "node", name, "-o", "json").stdout)
        return node

    def probe(self) -> subprocess.CompletedProcess[str]:
        """A write the policy refuses, stored nowhere (a server-side dry run is admitted as
        the write itself)."""
        return self.kubectl("annotate", "--dry-run=server", "node", B, "lwgpu-test/probe=x")


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    """The policy's message in kubectl's error; '' where the write went through, or was
    refused by anything else."""
    return done.stderr.split(DENIED, 1)[1].strip() if DENIED in done.stderr else ""


def labeller_pod(render: dict[str, dict], node: str) -> dict:
    """A pod of the DaemonSet's template bound to `node`. Without the DaemonSet's labels, so
    that an installed DaemonSet's controller never adopts it (and deletes it from a node that
    does not match its affinity)."""
    spec = dict(render["DaemonSet"]["spec"]["template"]["spec"], nodeName=node)
    metadata = {"name": f"labeller-{node}", "namespace": NS, "labels": {"lwgpu-test": "own"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
