"""``rotate`` (certs/rotate.py) and ``python -m certs rotate`` against the real kube-apiserver of
the session: the daily rotation re-issues the serving certificate under the CA the install
left, with one write, to the serving Secret; it never writes a caBundle, the CA Secret or the
ConfigMap, and leaves a CA that is due to the install (exit 1).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from certs import CertError
from tests.certs.install_cluster import CA_SECRET, SECRET, T0, TLS_FILES
from tests.support.certs import handshake, tls_server
from webhook.cli.certs import main


def versions_but_the_serving_secret(cluster) -> list[str]:
    """The resourceVersions of everything the rotation must leave alone."""
    return cluster.versions()[1:]


def test_nothing_due_writes_nothing(cluster, kube_requests):
    cluster.install(kube_requests, now=T0)
    seen = len(kube_requests.sent)
    result = cluster.rotate(kube_requests, now=T0 + timedelta(days=5))
    assert (result.secret, result.left) == ("unchanged", ())
    assert kube_requests.writes(seen) == []


def test_a_due_serving_certificate_is_reissued_under_the_same_ca(cluster, kube_requests, tmp_path):
    # Issued 21 days ago, 0.7 of its 30 days: due; re-issued now, so that TLS checks it.
    cluster.install(kube_requests, now=datetime.now(UTC) - timedelta(days=21))
    first, others = cluster.secret_set(), versions_but_the_serving_secret(cluster)
    seen = len(kube_requests.sent)
    result = cluster.rotate(kube_requests)
    assert (result.secret, result.left) == ("rotated", ())
    assert kube_requests.writes(seen) == [
        ("PUT", f"/api/v1/namespaces/{cluster.ns}/secrets/{SECRET}")
    ]
    assert versions_but_the_serving_secret(cluster) == others
    after = cluster.secret_set()
    assert after.cert != first.cert and after.issuer_of_cert() == first.ca
    secret = cluster.secret()
    for name in TLS_FILES:
        (tmp_path / name).write_bytes(base64.b64decode(secret["data"][name]))
    (tmp_path / "bundle.pem").write_bytes(base64.b64decode(cluster.bundles().pop()))
    with tls_server(tmp_path / "tls.crt", tmp_path / "tls.key") as port:
        assert handshake(port, tmp_path / "bundle.pem", f"lwgpu.{cluster.ns}.svc") == b"ok"


def test_a_ca_that_is_due_is_left_to_the_install(cluster, kube_requests):
    cluster.install(kube_requests, now=T0)
    first, others = cluster.secret_set(), versions_but_the_serving_secret(cluster)
    result = cluster.rotate(kube_requests, now=T0 + timedelta(days=210))  # of a 300-day CA
    assert result.secret == "rotated"
    assert [reason.split(":")[0] for reason in result.left] == ["CA"]
    assert versions_but_the_serving_secret(cluster) == others
    assert cluster.secret_set().ca_bundle == first.ca_bundle


def test_the_command_exits_1_while_the_ca_waits_for_the_install(cluster, control_plane, capsys):
    cluster.seed_set(datetime.now(UTC) - timedelta(days=210), cluster.spec.days)
    argv = [
        *("rotate", "--kubeconfig", str(control_plane.kubeconfig), "--namespace", cluster.ns),
        *("--service", "lwgpu", "--secret", SECRET, "--ca-secret", CA_SECRET),
    ]
    assert main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Secret {cluster.ns}/{SECRET}: rotated"
    assert lines[1].startswith("left to `certs install`: CA: less than a third of its lifetime")
    assert main(argv) == 1  # the serving certificate is new now; the CA still waits
    assert capsys.readouterr().out.startswith(f"Secret {cluster.ns}/{SECRET}: unchanged\n")


@pytest.mark.parametrize("seeded", ["nothing", "older install"])
def test_without_a_ca_secret_it_refuses_and_writes_nothing(cluster, kube_requests, seeded):
    """Only the install creates a CA or moves one out of an older serving Secret."""
    if seeded == "older install":
        cluster.seed_older_install(T0, cluster.spec.days)
    with pytest.raises(CertError, match=f"Secret {cluster.ns}/{CA_SECRET} holds no certificate"):
        cluster.rotate(kube_requests, now=T0)
    assert kube_requests.writes() == []


def test_a_migration_cut_short_is_finished(cluster, kube_requests):
    """The install was killed after writing the CA Secret, before the serving Secret: the
    rotation's write of the serving Secret drops the CA from it too."""
    older = cluster.seed_older_install(T0, cluster.spec.days)
    data = {k: base64.b64encode(v).decode() for k, v in older.authority.to_files().items()}
    cluster.seed_secret(metadata={"name": CA_SECRET}, type="Opaque", data=data)
    result = cluster.rotate(kube_requests, now=T0 + timedelta(days=1))
    assert (result.secret, result.left) == ("migrated", ())
    assert set(cluster.secret()["data"]) == TLS_FILES
