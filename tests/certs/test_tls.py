"""Generated certificates in a real TLS handshake on loopback, with Python's hostname checking,
and in ``openssl verify``."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from certs import generate
from tests.support.certs import (
    NAMESPACE,
    SANS,
    SERVICE,
    handshake,
    needs_openssl,
    openssl_verify,
    tls_server,
)


@pytest.fixture(scope="module", params=["ecdsa-p256", "rsa-2048"])
def cert_dir(request, tmp_path_factory) -> Path:
    """A generated set per key type, with an extra DNS name and loopback IP for local use."""
    out = tmp_path_factory.mktemp(request.param)
    generate(
        out, SERVICE, NAMESPACE, key_type=request.param, dns=["webhook.local"], ips=["127.0.0.1"]
    )
    return out


@needs_openssl
def test_openssl_verifies_the_chain(cert_dir):
    result = openssl_verify(cert_dir / "ca.crt", cert_dir / "tls.crt")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK")


@pytest.mark.parametrize("name", [*SANS, "webhook.local", "127.0.0.1"])
def test_handshake_succeeds_for_each_san(cert_dir, name):
    with tls_server(cert_dir / "tls.crt", cert_dir / "tls.key") as port:
        assert handshake(port, cert_dir / "ca.crt", name) == b"ok"


@pytest.mark.parametrize(
    "name",
    [
        "other",
        "lwgpu.default.svc",
        "lwgpu.lwgpu-system.svc.cluster.example",
        "evil.lwgpu",
        "127.0.0.2",
        "localhost",
    ],
)
def test_handshake_fails_for_another_name(cert_dir, name):
    with (
        tls_server(cert_dir / "tls.crt", cert_dir / "tls.key") as port,
        pytest.raises(ssl.SSLCertVerificationError, match="match"),
    ):
        handshake(port, cert_dir / "ca.crt", name)


def test_handshake_fails_against_another_ca(cert_dir, tmp_path):
    generate(tmp_path, SERVICE, NAMESPACE)
    with (
        tls_server(cert_dir / "tls.crt", cert_dir / "tls.key") as port,
        pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"),
    ):
        handshake(port, tmp_path / "ca.crt", SANS[-1])
