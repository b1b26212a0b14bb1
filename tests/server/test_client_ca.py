"""`serve --client-ca`: reviews need the apiserver's client certificate, probes do not.

Real gunicorn over real TLS: the serving pair comes from `certs.generate`, the client CAs
from `certs.authority` and the client certificates are built here with `cryptography`, as
an admin would issue the apiserver's (extended key usage clientAuth).
"""

from __future__ import annotations

import contextlib
import os
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.authority import Spec, issue_ca, new_key
from tests.support.builders import admission_review, gpu_pod
from tests.support.paths import REPO
from tools.loopback.server import serving
from tools.waiting import wait_for

POLICY = REPO / "policies" / "default.yaml"
REVIEW = admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="client-ca-review")
JSON = {"Content-Type": "application/json"}


def client_pair(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A new client CA and a clientAuth certificate it signed: (ca.crt, client.crt, client.key)."""
    directory.mkdir(parents=True)
    now = datetime.now(UTC)
    ca_cert, ca_key = issue_ca(Spec(name, "kube-system"), now)
    key = new_key("ecdsa-p256")
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-apiserver")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.crt", directory / "client.crt", directory / "client.key"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    """Two independent client CAs ("trusted", "other"), each with one client certificate."""
    root = tmp_path_factory.mktemp("clients")
    return {name: client_pair(root / name, name) for name in ("trusted", "other")}


@pytest.fixture(scope="module")
def server_options(tmp_path_factory, clients):
    """The module's server trusts a copy of the "trusted" client CA."""
    bundle = tmp_path_factory.mktemp("client-ca") / "client-ca.crt"
    bundle.write_bytes(clients["trusted"][0].read_bytes())
    return {"extra_args": ("--client-ca", str(bundle))}


def call(server, path: str, cert: tuple[Path, Path] | None) -> tuple[int, bytes]:
    """GET (or POST the review to a review endpoint) on a fresh connection with ``cert``."""
    with contextlib.closing(server.connect(client_cert=cert)) as conn:
        if path in ("/mutate", "/validate"):
            status, _, data = conn.call("POST", path, orjson.dumps(REVIEW), JSON)
        else:
            status, _, data = conn.call("GET", path)
        return status, data


@pytest.mark.parametrize(
    "path,client,status",
    [
        ("/mutate", None, 403),
        ("/validate", None, 403),
        ("/mutate", "trusted", 200),
        ("/validate", "trusted", 200),
        ("/healthz", None, 200),
        ("/readyz", None, 200),
        ("/metrics", None, 200),
        ("/healthz", "trusted", 200),
    ],
)
def test_reviews_need_a_verified_client_certificate(server, clients, path, client, status):
    cert = clients[client][1:] if client else None
    code, data = call(server, path, cert)
    assert code == status, data
    if status == 403:
        body = orjson.loads(data)
        assert (body["kind"], body["code"], body["reason"]) == ("Status", 403, "Forbidden")
        assert "--client-ca" in body["message"]
    elif path in ("/mutate", "/validate"):
        body = orjson.loads(data)
        assert body["kind"] == "AdmissionReview"
        assert body["response"]["uid"] == "client-ca-review"


@pytest.mark.parametrize("path", ["/mutate", "/healthz"])
def test_a_certificate_from_another_ca_fails_the_handshake(server, clients, path):
    # TLS 1.3 finishes the client's side of the handshake first; the server's alert
    # arrives on the first read, so the failure shows on the request, never as an answer.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        call(server, path, clients["other"][1:])


def test_refusals_are_counted_and_logged_as_403(server):
    assert call(server, "/validate", None)[0] == 403
    line = wait_for(
        lambda: [entry for entry in server.log_lines() if entry["status"] == 403],
        what="a 403 access-log line",
    )[-1]
    assert (line["endpoint"], line["decision"]) == ("validate", "error")
    errors = server.metrics()
    key = (
        "lwgpu_admission_request_errors_total",
        frozenset({("endpoint", "validate"), ("code", "403")}),
    )
    assert errors[key] >= 1


def test_rotated_client_ca_is_used_without_restart(tmp_path, clients):
    bundle = tmp_path / "client-ca.crt"
    bundle.write_bytes(clients["trusted"][0].read_bytes())
    # One worker: each checks the file at most once a second, on its next connection, and
    # the test cannot choose which worker a connection reaches; with two, a worker the new
    # CA has not reached yet could take the last call (it did, under load).
    args = ("--client-ca", str(bundle), "--workers", "1")
    with serving(tmp_path, POLICY, extra_args=args) as running:
        assert call(running, "/mutate", clients["trusted"][1:])[0] == 200
        rotated = tmp_path / "client-ca.new"
        rotated.write_bytes(clients["other"][0].read_bytes())
        os.replace(rotated, bundle)  # atomic, as kubelet swaps a Secret volume

        def accepts_other() -> bool:
            with contextlib.suppress(ssl.SSLError, ConnectionError):
                return call(running, "/mutate", clients["other"][1:])[0] == 200
            return False

        wait_for(accepts_other, what="the rotated client CA")
        with pytest.raises((ssl.SSLError, ConnectionError)):
            call(running, "/mutate", clients["trusted"][1:])
        assert running.process.poll() is None
