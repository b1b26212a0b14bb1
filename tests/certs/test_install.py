"""``install`` (certs/install.py) and ``python -m certs install`` against the real kube-apiserver
of the session: the CA Secret, the serving Secret and the CA bundle ConfigMap created and
rotated, the caBundle in every webhook configuration (tests/certs/conftest.py makes them), an
older install's serving Secret with the CA in it migrated, the apiserver's own answers to bad
input, and the command's exit code and line for each. Conflicts and racing installers are in
test_install_races.py; the daily rotation in test_rotate.py.
"""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from certs import CertError
from tests.certs.install_cluster import (
    BUNDLE,
    CA_SECRET,
    MUTATING,
    SECRET,
    T0,
    TLS_FILES,
    VALIDATING,
)
from tests.support.certs import handshake, run_certs, tls_server
from tools.loopback.server import free_port
from webhook.cli.certs import main


def test_first_run_creates_then_second_run_writes_nothing(cluster, kube_requests):
    result = cluster.install(kube_requests, now=T0)
    assert (result.secret, result.ca_secret, result.bundle) == ("created", "created", "created")
    assert result.patched == (
        f"{MUTATING}/{cluster.name}",
        f"{VALIDATING}/{cluster.name}",
        f"{VALIDATING}/{cluster.final}",
    )
    cert_set = cluster.secret_set()
    assert cluster.bundles() == {cert_set.ca_bundle_b64()} == {result.ca_bundle}
    base = f"/api/v1/namespaces/{cluster.ns}"
    assert [(m, p.removeprefix(base)) for m, p in kube_requests.writes()[3:]] == [
        ("POST", "/secrets"),  # the CA Secret
        ("POST", "/configmaps"),
        ("POST", "/secrets"),  # the serving Secret
    ]
    assert [m for m, _ in kube_requests.writes()[:3]] == ["PATCH"] * 3, "caBundles first"
    versions, seen = cluster.versions(), len(kube_requests.sent)
    again = cluster.install(kube_requests, now=T0 + timedelta(days=5))
    assert (again.secret, again.ca_secret, again.bundle) == ("unchanged",) * 3
    assert (again.patched, again.wrote) == ((), False)
    assert kube_requests.writes(seen) == [] and len(kube_requests.sent) > seen
    assert cluster.versions() == versions


def test_created_secret_serves_tls_trusted_by_the_ca_bundle(cluster, kube_requests, tmp_path):
    cluster.install(kube_requests, names=[cluster.name])
    secret = cluster.secret()
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(base64.b64decode(secret["data"][name]))
    # What the apiserver trusts is the caBundle in the configuration, not the Secret's ca.crt.
    hook = cluster.config(MUTATING, cluster.name)["webhooks"][0]
    (tmp_path / "bundle.pem").write_bytes(base64.b64decode(hook["clientConfig"]["caBundle"]))
    with tls_server(tmp_path / "tls.crt", tmp_path / "tls.key") as port:
        assert handshake(port, tmp_path / "bundle.pem", f"lwgpu.{cluster.ns}.svc") == b"ok"


@pytest.mark.parametrize(
    "fraction, expected, ca_count", [(0.5, "unchanged", 1), (0.7, "rotated", 1)]
)
def test_serving_certificate_rotation(cluster, kube_requests, fraction, expected, ca_count):
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    now = first.cert.not_valid_before_utc + fraction * (
        first.cert.not_valid_after_utc - first.cert.not_valid_before_utc
    )
    result = cluster.install(kube_requests, now=now)
    after = cluster.secret_set()
    assert result.secret == expected and len(after.ca_bundle) == ca_count
    assert (after.cert != first.cert) is (expected == "rotated") and after.ca == first.ca


def test_ca_rotation_keeps_old_ca_in_every_bundle(cluster, kube_requests):
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    result = cluster.install(kube_requests, now=T0 + timedelta(days=210))
    after = cluster.secret_set()
    assert result.secret == "rotated" and after.ca_bundle == (after.ca, first.ca)
    assert cluster.bundles() == {after.ca_bundle_b64()}


def test_precreated_empty_secret_is_filled_and_keeps_its_labels(cluster, kube_requests):
    # What a manifest creates so that pods can mount the Secret before the installer ran.
    cluster.seed_secret(
        type="kubernetes.io/tls",
        metadata={"name": SECRET, "labels": {"app": "lwgpu"}},
        data={"tls.crt": "", "tls.key": ""},
    )
    assert cluster.install(kube_requests, names=[cluster.name]).secret == "created"
    assert cluster.secret()["metadata"]["labels"] == {"app": "lwgpu"}
    assert ("PUT", f"/api/v1/namespaces/{cluster.ns}/secrets/{SECRET}") in kube_requests.writes()
    cluster.secret_set()


def test_an_older_install_is_migrated_keeping_its_ca_and_certificate(cluster, kube_requests):
    """The CA moves to its own Secret and out of the one the webhook mounts; nothing is
    re-issued, so the caBundles stay as they were and the pods serve on unchanged."""
    older = cluster.seed_older_install(T0, cluster.spec.days)
    bundles = cluster.bundles()
    result = cluster.install(kube_requests, now=T0 + timedelta(days=1))
    assert (result.secret, result.ca_secret, result.bundle) == ("migrated", "created", "created")
    assert result.patched == () and cluster.bundles() == bundles
    assert set(cluster.secret()["data"]) == TLS_FILES
    assert cluster.secret_set().to_files() == older.to_files()
    base = f"/api/v1/namespaces/{cluster.ns}"
    assert kube_requests.writes() == [
        ("POST", f"{base}/secrets"),
        ("POST", f"{base}/configmaps"),
        ("PUT", f"{base}/secrets/{SECRET}"),
    ], "the CA Secret holds the CA before it leaves the serving Secret"
    again = cluster.install(kube_requests, now=T0 + timedelta(days=1))
    assert again.wrote is False


# A Secret whose data is not base64 cannot exist: the apiserver decodes `data` as []byte and
# refuses the object (400), so install's "not valid base64" branch has no real case.
@pytest.mark.parametrize(
    "secret, message",
    [
        (None, "exists neither as a MutatingWebhookConfiguration"),
        ({"type": "Opaque", "data": {}}, "has type Opaque, expected kubernetes.io/tls"),
        (
            {
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": base64.b64encode(b"junk").decode(), "tls.key": ""},
            },
            "incomplete certificate set, missing tls.key",
        ),
        (
            {
                "name": CA_SECRET,
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": "", "tls.key": ""},
            },
            f"Secret {{ns}}/{CA_SECRET} has type kubernetes.io/tls, expected Opaque",
        ),
        (
            {"name": CA_SECRET, "data": {"ca.crt": base64.b64encode(b"junk").decode()}},
            f"Secret {{ns}}/{CA_SECRET}: incomplete CA, missing ca.key",
        ),
    ],
    ids=["missing-config", "opaque", "incomplete", "ca-of-cert-manager", "ca-incomplete"],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(cluster, kube_requests, secret, message):
    if secret is not None:
        fields = {k: v for k, v in secret.items() if k != "name"}
        cluster.seed_secret(metadata={"name": secret.get("name", SECRET)}, **fields)
        message = message.format(ns=cluster.ns)
    names = [cluster.name, f"{cluster.name}-missing"] if secret is None else [cluster.name]
    with pytest.raises(CertError, match=message):
        cluster.install(kube_requests, names=names)
    assert kube_requests.writes() == [] and cluster.bundles() == {None}


# What a refusal of `python -m certs install` starts with, before the refusal itself.
INSTALL_ERROR = "python -m certs install: error: "


@pytest.mark.parametrize(
    "who, missing, code, out, err",
    [
        (
            "admin",
            False,
            0,
            "Secret {ns}/lwgpu-tls: created\nSecret {ns}/lwgpu-ca: created\n"
            "ConfigMap {ns}/lwgpu-ca-bundle: created\n",
            "",
        ),
        ("admin", True, 2, "", 'webhook configuration "{name}-missing" exists'),
        ("no-rights", False, 2, "", "Kubernetes API answered 403 Forbidden: "),
        ("nobody-listening", False, 2, "", "cannot reach the Kubernetes API: "),
    ],
)
def test_cli(
    cluster, control_plane, service_accounts, tmp_path, capsys, who, missing, code, out, err
):
    """The command's exit code and its one line for each kind of answer the apiserver (or its
    absence) gives: success, a missing configuration, a ServiceAccount without RBAC (a real
    403), and an address nothing listens on. In-process: the processes are
    test_two_installer_processes_at_once's."""
    if who == "admin":
        kubeconfig = control_plane.kubeconfig
    elif who == "no-rights":
        kubeconfig = service_accounts.create("no-rights")
    else:
        kubeconfig = tmp_path / "dead.kubeconfig"
        kubeconfig.write_text(
            control_plane.kubeconfig.read_text().replace(
                control_plane.server, f"https://127.0.0.1:{free_port()}"
            )
        )
    configs = [cluster.name, cluster.final] + ([f"{cluster.name}-missing"] if missing else [])
    argv = [
        *("install", "--kubeconfig", str(kubeconfig), "--namespace", cluster.ns),
        *("--service", "lwgpu", "--secret", SECRET, "--ca-configmap", BUNDLE),
        *("--webhook-config", *configs),
    ]
    assert main(argv) == code
    printed = capsys.readouterr()
    assert printed.out.startswith(out.format(ns=cluster.ns))
    if code:
        assert printed.err.startswith(INSTALL_ERROR + err.format(name=cluster.name))
        assert printed.err.count("\n") == 1
        assert cluster.bundles() == {None}
    else:
        assert cluster.bundles() == {cluster.secret_set().ca_bundle_b64()}


def test_cli_without_any_cluster_configuration(tmp_path):
    result = run_certs(
        *("install", "--kubeconfig", tmp_path / "absent", "--namespace", "n", "--service", "s"),
        *("--secret", "x", "--webhook-config", "w"),
    )
    assert result.returncode == 2
    assert (
        result.stderr.startswith(INSTALL_ERROR + "no Kubernetes configuration")
        and result.stderr.count("\n") == 1
    )
