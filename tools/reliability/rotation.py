"""Certificate rotation and policy reload under creates: `python -m tools.reliability.rotation
[SCENARIO...] [--out FILE]`.

The cluster of the rollout scenarios (`webhook_cluster.py`: the real control plane, lwgpu
installed from deploy/ with only the caBundle set, the stand-in kubelet running the webhook's
pods), and the same stream of dry-run creates through kube-apiserver, which verifies each
replica's certificate against `lwgpu-mutate`'s caBundle. The Secret and the ConfigMap reach
the running replicas as kubelet's remount does: kubelet's own `AtomicWriter` swaps the
volume's `..data` symlink (pkg/volume/util/atomic_writer.go, `AtomicWriter.Write`), done by
`PodLifecycle` within 0.2 s of the change. After 10 s of creates, one change:

- rotate-ca: `python -m certs install`, run as the certificate Job's pod runs it, finds the
  CA due (an install 210 days ago with a 300-day CA, made before the stream) and rolls it: a
  new CA first in the caBundle, the old one kept, then the CA Secret, then the serving
  Secret with a certificate of the new CA;
- swap-key: a cert-manager style renewal: a new key and certificate from the same CA, the
  serving Secret updated in one write (`tls.crt`, `tls.key`, `ca.crt`);
- policy: the `lwgpu-policies` ConfigMap replaced by one with a class added: GRID-P4-2Q,
  missing from the policy served before the stream, so the stream's 2 GiB pod goes from
  4096MiB to 2048MiB once a replica has reloaded.

*Recovery* is the time from the change until every replica serves it: 8 TLS handshakes in a
row with each replica present the new certificate (both workers of a replica take new
connections), or each replica's `lwgpu_policy_generation` moved on.
"""

from __future__ import annotations

import base64
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs.authority import Spec, issue_serving
from certs.certset import Authority
from certs.install import install
from certs.stored import Places
from tools.cluster.install import NAMESPACE, POLICIES, run_certificate_job
from tools.paths import REPO
from tools.reliability import rollout
from tools.reliability.creates import Create
from tools.reliability.replicas import generation, served
from tools.reliability.rollout import STRIKE_AT_S, create_stream, failed_calls, finish, row
from tools.reliability.webhook_cluster import Cluster
from tools.waiting import wait_for

OUT = REPO / "bench-results" / "reliability-rotation.json"
SECONDS = 40  # of creates per scenario, at least
# The names the certificate Job passes to `certs install` (deploy/base/certs.yaml).
SERVICE, SECRET, CA_SECRET = "lwgpu-webhook", "lwgpu-webhook-tls", "lwgpu-ca"
BUNDLE, MUTATING = "lwgpu-ca-bundle", "lwgpu-mutate"
# A set as an install 210 days ago with a 300-day CA left it: the CA has less than a third of
# its lifetime left, so the next `certs install` rolls it (certs/rotation.py, `plan`).
AGED_DAYS, LIFETIME_DAYS = 210, 300
IN_A_ROW = 8  # handshakes with one replica that must all present the new certificate
EFFECT_S = 60  # for a change to reach every replica
ADDED = """\
  - name: GRID-P4-2Q
    memory: 2048Mi
    nodeSelector:
      aliyun.accelerator/nvidia_mem: 2048MiB
    nodeLabels:
      aliyun.accelerator/nvidia_name: GRID-P4-2Q
"""
NEW_CLASS = "2048MiB"  # what the 2 GiB pod selects once GRID-P4-2Q is back


def _addresses(c: Cluster) -> list[str]:
    return [pod.address for pod in c.installation.webhook]


def _wait_served(c: Cluster, der: bytes) -> None:
    wait_for(
        lambda: all(all(served(a) == der for _ in range(IN_A_ROW)) for a in _addresses(c)),
        EFFECT_S,
        interval=0.05,
        what="every replica serving the new certificate",
    )


def _secret_files(c: Cluster, name: str) -> dict[str, bytes]:
    secret = c.installation.kubelet.core.read_namespaced_secret(name, NAMESPACE)
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def _ca_bundle(c: Cluster) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(c.installation.tls_ca.read_bytes())


def age_the_ca(c: Cluster) -> None:
    """Replace the set with one an install made 210 days ago, its CA now due, and wait
    until every replica serves it (set-up, before the stream)."""
    core = c.installation.kubelet.core
    for name in (SECRET, CA_SECRET):
        core.delete_namespaced_secret(name, NAMESPACE)
    core.delete_namespaced_config_map(BUNDLE, NAMESPACE)
    spec = Spec(SERVICE, NAMESPACE, days=LIFETIME_DAYS, ca_days=LIFETIME_DAYS)
    places = Places(NAMESPACE, SECRET, CA_SECRET, BUNDLE)
    aged = datetime.now(UTC) - timedelta(days=AGED_DAYS)
    install(c.plane.api(), spec, places, [MUTATING], now=aged)
    _wait_served(c, _der(_secret_files(c, SECRET)["tls.crt"]))


def rotate_ca(c: Cluster) -> tuple[str, dict[str, Any]]:
    """`python -m certs install` as the certificate Job runs it, rolling the due CA."""
    old_ca = _secret_files(c, CA_SECRET)["ca.crt"]
    began = time.monotonic()
    run_certificate_job(c.plane, c.installation.kubelet)
    ran = time.monotonic() - began
    files = _secret_files(c, SECRET)
    new_ca = Authority.from_files(_secret_files(c, CA_SECRET), CA_SECRET).bundle[0]
    _wait_served(c, _der(files["tls.crt"]))
    bundle = _ca_bundle(c)
    rolled = new_ca not in x509.load_pem_x509_certificates(old_ca) and new_ca in bundle
    return (
        f"the install ran {ran:.1f} s; CA rolled: {rolled}; the caBundle holds {len(bundle)} "
        f"CAs, the new one first: {bundle[0] == new_ca}",
        {"ca_rolled": rolled, "bundle_cas": len(bundle), "new_ca_first": bundle[0] == new_ca},
    )


def swap_key(c: Cluster) -> tuple[str, dict[str, Any]]:
    """A new key and certificate from the same CA, written to the Secret in one update."""
    authority = Authority.from_files(_secret_files(c, CA_SECRET), CA_SECRET)
    cert, key = issue_serving(
        Spec(SERVICE, NAMESPACE), authority.bundle[0], authority.key, datetime.now(UTC)
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    ca_pem = authority.bundle[0].public_bytes(serialization.Encoding.PEM)
    core = c.installation.kubelet.core
    secret = core.read_namespaced_secret(SECRET, NAMESPACE)
    files = {"tls.crt": pem, "tls.key": key_pem, "ca.crt": ca_pem}
    secret.data = {k: base64.b64encode(v).decode() for k, v in files.items()}
    core.replace_namespaced_secret(SECRET, NAMESPACE, secret)
    _wait_served(c, _der(pem))
    return "one Secret update: tls.crt, tls.key and ca.crt, same CA", {}


def set_policy(c: Cluster, text: str) -> None:
    """Replace the policy ConfigMap's file and wait until every replica loaded it."""
    core = c.installation.kubelet.core
    config_map = core.read_namespaced_config_map(POLICIES, NAMESPACE)
    if (config_map.data or {}) == {"default.yaml": text}:
        return
    before = {a: generation(a) for a in _addresses(c)}
    config_map.data = {"default.yaml": text}
    core.replace_namespaced_config_map(POLICIES, NAMESPACE, config_map)
    wait_for(
        lambda: all(generation(a) > before[a] for a in _addresses(c)),
        EFFECT_S,
        interval=0.05,
        what="every replica serving the new policy",
    )


def _shipped() -> str:
    text = (REPO / "policies" / "default.yaml").read_text()
    assert ADDED in text, "the shipped policy has the class the policy scenario adds"
    return text


def set_class(c: Cluster) -> tuple[str, dict[str, Any]]:
    """The shipped policy, GRID-P4-2Q included, replacing one without it."""
    set_policy(c, _shipped())
    return "", {}


def without_the_class(c: Cluster) -> None:
    """Set-up of the policy scenario: the policy without GRID-P4-2Q, served everywhere."""
    set_policy(c, _shipped().replace(ADDED, ""))


def decided(records: list[Create], struck: float, effect: float) -> tuple[str, dict[str, Any]]:
    """The policy row's note: how the creates sent after every replica reloaded were decided
    (and, to show the change is one the stream sees, those answered before it began)."""
    before = [r for r in records if r.end < struck and not r.failed]
    after = [r for r in records if r.start > effect and not r.failed]
    old = sum(r.selector != NEW_CLASS for r in after)
    first = min((r.start for r in records if r.selector == NEW_CLASS), default=effect)
    note = (
        f"{len(after)} creates sent after every replica reloaded, {old} of them decided by "
        f"the old policy; the first {NEW_CLASS} answer came {first - effect:+.2f} s from then"
    )
    return note, {
        "before_change": len(before),
        "new_class_before_change": sum(r.selector == NEW_CLASS for r in before),
        "after_reload": len(after),
        "decided_by_old_policy_after_reload": old,
    }


@dataclass(frozen=True)
class Change:
    """One scenario's change: its row's name, the set-up before the stream, the change
    (returns the row's note and extra fields once it took effect everywhere), and what the
    records then say (replacing the note and fields)."""

    fault: str
    change: Callable[[Cluster], tuple[str, dict[str, Any]]]
    setup: Callable[[Cluster], None] | None = None
    judge: Callable[[list[Create], float, float], tuple[str, dict[str, Any]]] | None = None

    def run(self, c: Cluster, rate: float, seconds: float = SECONDS) -> dict[str, Any]:
        """Set up, start `rate` creates a second, change after 10 s, end `seconds` later."""
        if self.setup is not None:
            self.setup(c)
        since = c.plane.log("kube-apiserver").stat().st_size
        with create_stream(c, rate) as stream:
            stream.wait_sent(int(rate * min(STRIKE_AT_S, seconds / 4)))
            struck = time.monotonic()
            note, extra = self.change(c)
            effect = time.monotonic()
            finish(stream, seconds)
        if self.judge is not None:
            note, extra = self.judge(stream.records, struck, effect)
        calls = failed_calls(c, since)
        return row(self.fault, stream, struck, effect - struck, note, calls, **extra)


CHANGES = {
    "rotate-ca": Change(
        "`certs install` rolling the CA (old CA kept in the caBundle)", rotate_ca, age_the_ca
    ),
    "swap-key": Change("cert-manager style swap of key and certificate, same CA", swap_key),
    "policy": Change(
        "policy ConfigMap replaced: class GRID-P4-2Q added", set_class, without_the_class, decided
    ),
}
SCENARIOS: dict[str, Callable[[Cluster], dict[str, Any]]] = {
    f"{name}{suffix}": functools.partial(change.run, rate=rate)
    for name, change in CHANGES.items()
    for suffix, rate in (("", 20), ("-100", 100))
}


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios (all by default) on one cluster; print the table."""
    return rollout.main(argv, "tools.reliability.rotation", __doc__, SCENARIOS, OUT)


def run(names: list[str]) -> list[dict[str, Any]]:
    """The rows of the scenarios named, in that order, on one cluster of their own."""
    return rollout.run(names, SCENARIOS)


if __name__ == "__main__":
    sys.exit(main())
