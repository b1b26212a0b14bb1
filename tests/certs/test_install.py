"""``install`` against the Kubernetes API double (tests/fakes/kubeapi.py), a real-protocol REST
server."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta

import pytest

from certs import CertError, CertSet, Spec
from certs.install import install
from tests.fakes.kubeapi import KubeAPIDouble
from tests.support.certs import SANS, handshake, run_certs, tls_server

ADM = "admissionregistration.k8s.io/v1"
MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
SPEC = Spec("lwgpu", "lwgpu-system", days=30, ca_days=300)
T0 = datetime(2030, 1, 1, tzinfo=UTC)
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
SECRET_PATH = r"/namespaces/lwgpu-system/secrets/lwgpu-tls$"


def webhook_config(kind: str, name: str, hooks: int = 2) -> dict:
    """A webhook configuration as the deploy manifests create it: no caBundle yet."""
    return {
        "apiVersion": ADM,
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"h{i}.lwgpu.io",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {"name": "lwgpu", "namespace": "lwgpu-system", "path": "/mutate"}
                },
            }
            for i in range(hooks)
        ],
    }


@pytest.fixture
def api(kube):
    """The API double with the webhook configurations whose caBundles the installer patches."""
    kube.seed(webhook_config(MUTATING, "lwgpu"))
    kube.seed(webhook_config(VALIDATING, "lwgpu"))
    kube.seed(webhook_config(VALIDATING, "lwgpu-final", hooks=1))
    return kube


def secret_set(api: KubeAPIDouble) -> CertSet:
    secret = api.get("v1", "Secret", "lwgpu-tls", "lwgpu-system")
    assert secret["type"] == "kubernetes.io/tls"
    files = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    return CertSet.from_files(files, "secret")


def bundles(api: KubeAPIDouble) -> set[str]:
    """Every caBundle across the seeded configurations."""
    found = set()
    for kind, name in [(MUTATING, "lwgpu"), (VALIDATING, "lwgpu"), (VALIDATING, "lwgpu-final")]:
        found |= {
            hook["clientConfig"].get("caBundle") for hook in api.get(ADM, kind, name)["webhooks"]
        }
    return found


def writes(api: KubeAPIDouble, since: int = 0) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in api.requests[since:] if r.method in WRITES]


def test_first_run_creates_then_second_run_writes_nothing(api):
    result = install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu", "lwgpu-final"], now=T0)
    assert result.secret == "created"
    assert result.patched == (
        f"{MUTATING}/lwgpu",
        f"{VALIDATING}/lwgpu",
        f"{VALIDATING}/lwgpu-final",
    )
    cert_set = secret_set(api)
    assert bundles(api) == {cert_set.ca_bundle_b64()} == {result.ca_bundle}
    assert [m for m, _ in writes(api)] == ["PATCH", "PATCH", "PATCH", "POST"], (
        "caBundle before the Secret"
    )
    seen = len(api.requests)
    again = install(
        api.api_client(), SPEC, "lwgpu-tls", ["lwgpu", "lwgpu-final"], now=T0 + timedelta(days=5)
    )
    assert (again.secret, again.patched, again.wrote) == ("unchanged", (), False)
    assert writes(api, seen) == [] and len(api.requests) > seen


def test_created_secret_serves_tls_trusted_by_the_ca_bundle(api, tmp_path):
    install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"])
    secret = api.get("v1", "Secret", "lwgpu-tls", "lwgpu-system")
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(base64.b64decode(secret["data"][name]))
    # What the apiserver trusts is the caBundle in the configuration, not the Secret's ca.crt.
    hook = api.get(ADM, MUTATING, "lwgpu")["webhooks"][0]
    (tmp_path / "bundle.pem").write_bytes(base64.b64decode(hook["clientConfig"]["caBundle"]))
    with tls_server(tmp_path / "tls.crt", tmp_path / "tls.key") as port:
        assert handshake(port, tmp_path / "bundle.pem", SANS[2]) == b"ok"


@pytest.mark.parametrize(
    "fraction, expected, ca_count", [(0.5, "unchanged", 1), (0.7, "rotated", 1)]
)
def test_serving_certificate_rotation(api, fraction, expected, ca_count):
    install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"], now=T0)
    first = secret_set(api)
    now = first.cert.not_valid_before_utc + fraction * (
        first.cert.not_valid_after_utc - first.cert.not_valid_before_utc
    )
    result = install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"], now=now)
    after = secret_set(api)
    assert result.secret == expected and len(after.ca_bundle) == ca_count
    assert (after.cert != first.cert) is (expected == "rotated") and after.ca == first.ca


def test_ca_rotation_keeps_old_ca_in_every_bundle(api):
    install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu", "lwgpu-final"], now=T0)
    first = secret_set(api)
    result = install(
        api.api_client(), SPEC, "lwgpu-tls", ["lwgpu", "lwgpu-final"], now=T0 + timedelta(days=210)
    )
    after = secret_set(api)
    assert result.secret == "rotated" and after.ca_bundle == (after.ca, first.ca)
    assert bundles(api) == {after.ca_bundle_b64()}


@pytest.mark.parametrize(
    "method, path, times, calls",
    [
        ("PUT", SECRET_PATH, 1, 2),
        ("PUT", SECRET_PATH, 4, 5),
        ("PATCH", r"/mutatingwebhookconfigurations/lwgpu$", 2, 3),
    ],
)
def test_conflicts_are_retried(api, method, path, times, calls):
    install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"], now=T0)
    first = secret_set(api)
    api.inject(method, path, 409, times=times, reason="Conflict")
    seen = len(api.requests)
    result = install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"], now=T0 + timedelta(days=210))
    assert result.secret == "rotated" and secret_set(api).ca != first.ca
    assert sum(1 for m, p in writes(api, seen) if m == method and re.search(path, p)) == calls
    assert bundles(api) - {None} == {secret_set(api).ca_bundle_b64()}


def test_endless_conflicts_give_up_with_a_clear_error(api):
    install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"], now=T0)
    api.inject("PUT", SECRET_PATH, 409, times=100, reason="Conflict")
    with pytest.raises(CertError, match="kept changing under us: gave up after 5 conflicts"):
        install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"], now=T0 + timedelta(days=210))


def test_precreated_empty_secret_is_filled_and_keeps_its_labels(api):
    api.seed(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {
                "name": "lwgpu-tls",
                "namespace": "lwgpu-system",
                "labels": {"app": "lwgpu"},
            },
            "data": {"tls.crt": "", "tls.key": ""},
        }
    )
    assert install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"]).secret == "created"
    assert api.get("v1", "Secret", "lwgpu-tls", "lwgpu-system")["metadata"]["labels"] == {
        "app": "lwgpu"
    }
    assert ("PUT", "/api/v1/namespaces/lwgpu-system/secrets/lwgpu-tls") in writes(api)


@pytest.mark.parametrize(
    "secret, message",
    [
        (None, 'webhook configuration "missing" exists neither as a MutatingWebhookConfiguration'),
        ({"type": "Opaque", "data": {}}, "has type Opaque, expected kubernetes.io/tls"),
        (
            {"type": "kubernetes.io/tls", "data": {"tls.crt": "not base64!"}},
            "data is not valid base64",
        ),
        (
            {"type": "kubernetes.io/tls", "data": {"tls.crt": base64.b64encode(b"junk").decode()}},
            "incomplete",
        ),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(api, secret, message):
    if secret is not None:
        api.seed(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "lwgpu-tls", "namespace": "lwgpu-system"},
                **secret,
            }
        )
    names = ["lwgpu", "missing"] if secret is None else ["lwgpu"]
    seen = len(api.requests)
    with pytest.raises(CertError, match=message):
        install(api.api_client(), SPEC, "lwgpu-tls", names)
    assert writes(api, seen) == [] and bundles(api) == {None}


def test_api_outage_is_a_clear_error(api):
    api.set_down(True)
    with pytest.raises(CertError, match="Kubernetes API answered 503"):
        install(api.api_client(), SPEC, "lwgpu-tls", ["lwgpu"])


@pytest.mark.parametrize(
    "configs, code, out",
    [
        (["lwgpu", "lwgpu-final"], 0, "Secret lwgpu-system/lwgpu-tls: created"),
        (["nope"], 2, ""),
    ],
)
def test_cli_with_kubeconfig(api, tmp_path, configs, code, out):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    result = run_certs(
        *(
            "install",
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            "lwgpu-system",
            "--service",
            "lwgpu",
        ),
        *("--secret", "lwgpu-tls", "--webhook-config", *configs),
    )
    assert result.returncode == code, result.stderr
    assert result.stdout.startswith(out)
    if code:
        assert result.stderr.count("\n") == 1 and '"nope" exists neither' in result.stderr
    else:
        assert api.get("v1", "Secret", "lwgpu-tls", "lwgpu-system") is not None


def test_cli_without_any_cluster_configuration(tmp_path):
    result = run_certs(
        *("install", "--kubeconfig", tmp_path / "absent", "--namespace", "n", "--service", "s"),
        *("--secret", "x", "--webhook-config", "w"),
    )
    assert result.returncode == 2
    assert (
        result.stderr.startswith("certs: error: no Kubernetes configuration")
        and result.stderr.count("\n") == 1
    )
