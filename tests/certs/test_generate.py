"""``generate``: the files, their modes, the extensions the apiserver needs, and re-runs."""

from __future__ import annotations

import base64
import stat
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import generate, load_dir
from tests.support.certs import run_certs

NOW = datetime(2030, 1, 1, tzinfo=UTC)
FILES = {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}


def _ext(cert: x509.Certificate, kind):
    return cert.extensions.get_extension_for_class(kind)


@pytest.mark.parametrize("name, mode", FILES.items())
def test_files_and_modes(tmp_path, name, mode):
    assert generate(tmp_path, "lwgpu", "lwgpu-system", now=NOW) is True
    assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], (
        "temporary files left behind"
    )


@pytest.mark.parametrize(
    "key_type, key_class, encipher",
    [("ecdsa-p256", ec.EllipticCurvePrivateKey, False), ("rsa-2048", rsa.RSAPrivateKey, True)],
)
def test_extensions(tmp_path, key_type, key_class, encipher):
    generate(tmp_path, "lwgpu", "lwgpu-system", key_type=key_type, days=30, ca_days=90, now=NOW)
    cert_set = load_dir(tmp_path)
    ca, cert = cert_set.ca, cert_set.cert
    assert isinstance(cert_set.key, key_class) and isinstance(cert_set.ca_key, key_class)
    ca_bc = _ext(ca, x509.BasicConstraints)
    assert ca_bc.critical and ca_bc.value.ca
    assert _ext(ca, x509.KeyUsage).value.key_cert_sign and _ext(ca, x509.KeyUsage).value.crl_sign
    assert _ext(cert, x509.BasicConstraints).value.ca is False
    usage = _ext(cert, x509.KeyUsage).value
    assert (
        usage.digital_signature and usage.key_encipherment is encipher and not usage.key_cert_sign
    )
    assert list(_ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    ca_ski = _ext(ca, x509.SubjectKeyIdentifier).value.digest
    assert _ext(cert, x509.AuthorityKeyIdentifier).value.key_identifier == ca_ski
    assert _ext(ca, x509.AuthorityKeyIdentifier).value.key_identifier == ca_ski
    assert cert.not_valid_after_utc - NOW == timedelta(days=30)
    assert ca.not_valid_after_utc - NOW == timedelta(days=90)
    assert cert.not_valid_before_utc < NOW, "backdated for clock skew"


@pytest.mark.parametrize(
    "extra, expected_dns",
    [
        ({}, ["s", "s.n", "s.n.svc", "s.n.svc.cluster.local"]),
        (
            {"dns": ["localhost", "s"]},
            ["s", "s.n", "s.n.svc", "s.n.svc.cluster.local", "localhost"],
        ),
    ],
)
def test_sans(tmp_path, extra, expected_dns):
    generate(tmp_path, "s", "n", ips=["127.0.0.1", "::1"], now=NOW, **extra)
    sans = _ext(load_dir(tmp_path).cert, x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == expected_dns
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]


@pytest.mark.parametrize(
    "rerun, written, same_ca, same_cert",
    [
        ({}, False, True, True),
        ({"now": NOW + timedelta(days=50)}, False, True, True),  # of 90: not due yet
        ({"force": True}, True, False, False),
        ({"dns": ["extra.local"]}, True, True, False),
        ({"ips": ["10.0.0.1"]}, True, True, False),
        ({"key_type": "rsa-2048"}, True, True, False),
    ],
)
def test_rerun(tmp_path, rerun, written, same_ca, same_cert):
    generate(tmp_path, "lwgpu", "lwgpu-system", now=NOW)
    before = {name: (tmp_path / name).read_bytes() for name in FILES}
    assert generate(tmp_path, "lwgpu", "lwgpu-system", **{"now": NOW, **rerun}) is written
    after = {name: (tmp_path / name).read_bytes() for name in FILES}
    assert (after["ca.key"] == before["ca.key"]) is same_ca
    assert (after["tls.crt"] == before["tls.crt"]) is same_cert
    assert after["ca.crt"] == before["ca.crt"] if same_ca else after["ca.crt"] != before["ca.crt"]


def test_cli_prints_the_ca_bundle(tmp_path):
    result = run_certs(
        *[
            "generate",
            "--service",
            "lwgpu",
            "--namespace",
            "lwgpu-system",
            "--days",
            "10",
            "--key-type",
            "rsa-2048",
        ],
        *("--dns", "localhost", "--out", tmp_path / "out"),
    )
    assert result.returncode == 0, result.stderr
    assert base64.b64decode(result.stdout.strip()) == (tmp_path / "out" / "ca.crt").read_bytes()
    assert "wrote" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--service", "Bad_Name", "--namespace", "n"], "not a DNS-1123 label"),
        (["--service", "s", "--namespace", "n", "--days", "0"], "must be positive"),
        (
            ["--service", "s", "--namespace", "n", "--ip", "300.1.1.1"],
            "does not appear to be an IPv4 or IPv6",
        ),
    ],
)
def test_cli_rejects_bad_flags(tmp_path, args, message):
    result = run_certs("generate", "--out", tmp_path / "o", *args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
