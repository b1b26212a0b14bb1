"""``install`` when it is not alone (certs/install.py): conflicts are real 409s from the real
kube-apiserver. A second writer changes the object between the installer's read and its write
(`Update` in staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go refuses a
stale resourceVersion), and of two installers creating the Secret at once one gets
AlreadyExists (`Create` in the same file), also a 409.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs import CertError
from certs import install as install_module
from certs.authority import issue_ca
from certs.install import IN_FLIGHT
from tests.certs.install_cluster import BUNDLE, CA_SECRET, MUTATING, SECRET, T0, WRITER
from tests.support.paths import REPO
from tools.cluster.controlplane import environment


@pytest.mark.parametrize(
    "method, target, times, calls",
    [
        ("PUT", SECRET, 1, 2),
        ("PUT", SECRET, 4, 5),
        # The CA Secret's write lost: the run issues yet another CA and drops the first.
        ("PUT", CA_SECRET, 1, 2),
        ("PATCH", "mutating", 2, 3),
    ],
)
def test_conflicts_from_a_concurrent_writer_are_retried(
    cluster, kube_requests, method, target, times, calls
):
    """Each time the installer is about to write, someone else writes first: the apiserver
    answers 409, the installer reads again and writes on top, keeping the other write."""
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    path = (
        rf"/namespaces/{cluster.ns}/secrets/{target}$"
        if target != "mutating"
        else rf"/mutatingwebhookconfigurations/{cluster.name}$"
    )
    done = cluster.interfere(kube_requests, method, path, times)
    seen = len(kube_requests.sent)
    result = cluster.install(kube_requests, now=T0 + timedelta(days=210))
    assert len(done) == times
    assert result.secret == "rotated" and cluster.secret_set().ca != first.ca
    sent = [p for m, p in kube_requests.writes(seen) if m == method and re.search(path, p)]
    assert len(sent) == calls
    assert cluster.bundles() == {cluster.secret_set().ca_bundle_b64()}
    other = (
        cluster.secret(target) if target != "mutating" else cluster.config(MUTATING, cluster.name)
    )
    assert other["metadata"]["annotations"][WRITER] == str(times)


def test_endless_conflicts_give_up_and_the_bundle_still_trusts_the_secret(cluster, kube_requests):
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    cluster.interfere(kube_requests, "PUT", rf"/secrets/{SECRET}$", times=100)
    with pytest.raises(CertError, match="kept changing under us: gave up after 5 conflicts"):
        cluster.install(kube_requests, now=T0 + timedelta(days=210))
    # The bundles were patched first (new CA + old), then the CA Secret; the serving Secret
    # kept its certificate, whose CA they still hold: the webhook stays reachable.
    assert cluster.secret_set().cert == first.cert
    for bundle in cluster.bundles():
        assert first.ca in x509.load_pem_x509_certificates(base64.b64decode(bundle))


def test_two_installers_racing_for_the_first_secret(cluster, kube_requests):
    """Both read "no Secret", both create the CA Secret at the same moment: the apiserver
    keeps one, the loser gets AlreadyExists, reads the winner's CA, and patches its bundle
    everywhere; of the serving Secret's creates, too, one wins and the other run finds it."""
    both_ready = threading.Barrier(2, timeout=60)
    held = threading.local()

    def hold_create(sent) -> None:
        # Each run's first Secret create is its CA Secret's (certs/install.py's order).
        secrets = f"/namespaces/{cluster.ns}/secrets"
        if sent.method == "POST" and sent.path.endswith(secrets) and not hasattr(held, "once"):
            held.once = True
            both_ready.wait()

    kube_requests.before.append(hold_create)
    results, errors = [], []

    def run() -> None:
        try:
            results.append(cluster.install(kube_requests, now=T0))
        except Exception as exc:  # reported below, with the other thread's outcome
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert sorted(r.ca_secret for r in results) == ["created", "unchanged"]
    assert sorted(r.secret for r in results) == ["created", "unchanged"]
    final = cluster.secret_set().ca_bundle_b64()
    assert [r.ca_bundle for r in results] == [final, final]
    assert cluster.bundles() == {final}
    posts = [p for m, p in kube_requests.writes() if m == "POST" and p.endswith("/secrets")]
    assert len(posts) >= 3, "two CA Secret creates, then at least one serving Secret create"


def test_two_installer_processes_at_once(cluster, control_plane):
    """Two `python -m certs install` at the same time (the Job and a CronJob run, say): both
    exit 0, one created the Secret, and every webhook trusts the CA of the Secret kept."""
    argv = [
        *(sys.executable, "-m", "certs", "install", "--namespace", cluster.ns),
        *("--service", "lwgpu", "--secret", SECRET, "--ca-configmap", BUNDLE),
        *("--webhook-config", cluster.name, cluster.final),
    ]
    # KUBECONFIG, as the CLI reads it when no --kubeconfig is given
    env = environment(control_plane)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    procs = [
        subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    firsts = sorted(out.splitlines()[0] for out, _ in outs)
    assert firsts == [
        f"Secret {cluster.ns}/{SECRET}: created",
        f"Secret {cluster.ns}/{SECRET}: unchanged",
    ]
    assert all(err == "" for _, err in outs)
    assert cluster.bundles() == {cluster.secret_set().ca_bundle_b64()}


def test_a_run_too_slow_for_in_flight_leaves_the_secret_alone(cluster, kube_requests, monkeypatch):
    """Others keep a run's new CA in the caBundles for IN_FLIGHT only: a run that reaches its
    CA Secret write later than half of that stops before it: the Secrets stay as they were."""
    monkeypatch.setattr(install_module, "IN_FLIGHT", timedelta(seconds=1))
    kube_requests.before.append(lambda sent: time.sleep(0.2) if sent.method == "PATCH" else None)
    with pytest.raises(CertError, match="between issuing the new CA and writing the CA Secret"):
        cluster.install(kube_requests, now=T0)
    assert [m for m, _ in kube_requests.writes()] == ["PATCH", "PATCH", "PATCH"]  # no POST


@pytest.mark.parametrize("later, kept", [(timedelta(minutes=5), True), (IN_FLIGHT, False)])
def test_a_ca_not_in_the_secret_stays_while_in_flight(cluster, kube_requests, later, kept):
    """A CA that an installer killed before its CA Secret write left in a caBundle: kept
    while another installer might still write a certificate signed by it, dropped after."""
    cluster.install(kube_requests, now=T0)
    mine = cluster.secret_set()
    other, _ = issue_ca(cluster.spec, T0)
    body = (mine.bundle_pem() + other.public_bytes(serialization.Encoding.PEM)).decode()
    with_other = base64.b64encode(body.encode()).decode()
    hooks = cluster.config(MUTATING, cluster.name)["webhooks"]
    for hook in hooks:
        hook["clientConfig"]["caBundle"] = with_other
    cluster.adm.patch_mutating_webhook_configuration(cluster.name, {"webhooks": hooks})
    result = cluster.install(kube_requests, now=T0 + later)
    assert result.secret == "unchanged"
    expected = {with_other, mine.ca_bundle_b64()} if kept else {mine.ca_bundle_b64()}
    assert cluster.bundles() == expected
