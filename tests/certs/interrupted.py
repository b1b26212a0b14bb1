"""`python -m certs install` stopped after a chosen write and SIGKILLed there, and the state it
leaves, for tests/certs/test_install_interrupted.py.

`Stepped` runs the command as tests/certs/stepped_install.py does (a real process on the real
kube-apiserver of the session); `observe` reads the Secrets and every caBundle back and says
whether a TLS handshake with the serving Secret's certificate verifies against each caBundle,
the invariant: never a caBundle that does not verify the serving certificate.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from kubernetes.client.exceptions import ApiException

from certs.certset import Authority, load_serving, signed_by_any
from tests.certs.install_cluster import BUNDLE, CA_SECRET, SECRET, Cluster
from tests.support.certs import handshake, tls_server
from tests.support.paths import REPO
from tools.cluster.controlplane import environment

# Long enough for the slowest run seen here (a second of imports, a dozen requests) many times.
STEP_TIMEOUT_S = 60


def install_args(cluster: Cluster) -> list[str]:
    """`python -m certs` arguments for the cluster's Secrets, ConfigMap and its three
    configurations."""
    return [
        *("install", "--namespace", cluster.ns, "--service", "lwgpu", "--secret", SECRET),
        *("--ca-secret", CA_SECRET, "--ca-configmap", BUNDLE),
        *("--days", str(cluster.spec.days), "--ca-days", str(cluster.spec.ca_days)),
        *("--webhook-config", cluster.name, cluster.final),
    ]


class Stepped:
    """One `python -m certs install` that stops after each write until told to go on."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.certs.stepped_install", *install_args(cluster)],
            cwd=REPO,
            env=environment(cluster.plane),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.printed: list[str] = []

    def next_write(self) -> str | None:
        """The write it stopped after, as `PATCH V-final` or `PUT CA Secret (409)`; None once
        it exited instead (its exit code is then in `proc.returncode`)."""
        assert self.proc.stdout is not None
        watchdog = threading.Timer(STEP_TIMEOUT_S, self.proc.kill)
        watchdog.start()
        try:
            for line in self.proc.stdout:
                if line.startswith("@wrote "):
                    return self._label(*line.split()[1:])
                self.printed.append(line.rstrip("\n"))
        finally:
            watchdog.cancel()
        self.proc.wait()
        return None

    def go(self) -> None:
        """Let it send its next request."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL, where it stands: after its last write, before its next request."""
        os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(STEP_TIMEOUT_S) == -signal.SIGKILL
        self._close()

    def finish(self) -> int:
        """Let it run to its end without stopping; its exit code."""
        # communicate() closes stdin: reading it answers at once from then on, no more stops.
        out, err = self.proc.communicate(timeout=STEP_TIMEOUT_S)
        self.printed += out.splitlines() + err.splitlines()
        return self.proc.returncode

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _label(self, method: str, path: str, status: str) -> str:
        target = path.rsplit("/", 1)[-1]
        if "/secrets/" in path:
            what = "CA Secret" if target == CA_SECRET else "Secret"
        elif "/configmaps/" in path:
            what = "ConfigMap"
        else:
            kind = "M" if "/mutatingwebhookconfigurations/" in path else "V"
            what = f"{kind}-final" if target == self.cluster.final else kind
        return f"{method} {what}" + ("" if re.fullmatch(r"2\d\d", status) else f" ({status})")


class CaNames:
    """CA1, CA2, ... in the order a test first sees each CA, for the table."""

    def __init__(self) -> None:
        self.names: dict[bytes, str] = {}

    def __call__(self, ca: x509.Certificate) -> str:
        return self.names.setdefault(ca.fingerprint(hashes.SHA256()), f"CA{len(self.names) + 1}")


@dataclass(frozen=True)
class State:
    """The CA Secret's CAs, the serving Secret's certificate (by its CA), each configuration's
    caBundle."""

    ca_secret: str
    secret: str
    bundles: tuple[str, ...]  # M, V, V-final; each webhook's caBundle, `/` between webhooks
    verifies: bool | None  # None: no serving certificate yet, so nothing to verify

    @property
    def verdict(self) -> str:
        """The table's last column."""
        return {None: "no cert yet", True: "yes", False: "NO"}[self.verifies]


def _files(cluster: Cluster, name: str) -> dict[str, bytes]:
    try:
        data = cluster.secret(name)["data"] or {}
    except ApiException as exc:
        assert exc.status == 404
        data = {}
    return {k: base64.b64decode(v) for k, v in data.items() if v}


def observe(cluster: Cluster, names: CaNames, scratch: Path) -> State:
    """The cluster's state now, as `State` holds it."""
    files, ca_files = _files(cluster, SECRET), _files(cluster, CA_SECRET)
    # An older install's serving Secret holds its CA too: the one a migration moves.
    authorities = [
        Authority.from_files(held, "Secret")
        for held in (ca_files, {k: v for k, v in files.items() if k.startswith("ca.")})
        if held
    ]
    ca_secret = " ".join(names(ca) for ca in authorities[0].bundle) if ca_files else "none"
    bundles = [
        [hook["clientConfig"].get("caBundle") for hook in cluster.config(kind, name)["webhooks"]]
        for kind, name in cluster.targets
    ]
    described = tuple(
        "/".join(dict.fromkeys(_describe_bundle(b, names) for b in hooks)) for hooks in bundles
    )
    serving = load_serving({k: v for k, v in files.items() if k.startswith("tls.")}, "Secret")
    if serving is None:
        return State(ca_secret, "none", described, None)
    [issuer] = [
        ca
        for authority in authorities
        for ca in authority.bundle
        if signed_by_any(serving[0], (ca,))
    ][:1]
    secret = f"cert by {names(issuer)}" + (", CA too" if "ca.key" in files else "")
    (scratch / "tls.crt").write_bytes(files["tls.crt"])
    (scratch / "tls.key").write_bytes(files["tls.key"])
    distinct = {b for hooks in bundles for b in hooks}
    with tls_server(scratch / "tls.crt", scratch / "tls.key") as port:
        verifies = all(_trusts(port, b, cluster.ns, scratch) for b in distinct)
    return State(ca_secret, secret, described, verifies)


def _describe_bundle(b64: str | None, names: CaNames) -> str:
    if not b64:
        return "-"
    return " ".join(names(ca) for ca in x509.load_pem_x509_certificates(base64.b64decode(b64)))


def _trusts(port: int, b64: str | None, namespace: str, scratch: Path) -> bool:
    """Whether the apiserver, given this caBundle, would complete the handshake."""
    if not b64:
        return False
    (scratch / "bundle.pem").write_bytes(base64.b64decode(b64))
    try:
        return handshake(port, scratch / "bundle.pem", f"lwgpu.{namespace}.svc") == b"ok"
    except ssl.SSLCertVerificationError:
        return False
