"""The control plane's certificates: one CA, the apiserver's serving certificate, client
certificates for the admin and the components, and the service-account signing key pair.

Everything is written as PEM into one directory; nothing here is meant to outlive a test run
(one-day certificates, ECDSA P-256 for TLS, RSA for service-account tokens as kube-apiserver's
`--service-account-key-file` accepts either).
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The in-cluster names kube-apiserver serves under, and the first address of the service range
# (the `kubernetes` Service's ClusterIP).
APISERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
APISERVER_IPS = ("127.0.0.1", "10.96.0.1")
LIFETIME = timedelta(days=1)

Key = ec.EllipticCurvePrivateKey


def _name(common: str, organization: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if organization:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _write_key(path: Path, key: Key | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


class Authority:
    """A CA written to `dir/ca.crt` and `dir/ca.key` that signs the other certificates."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        self.cert = (
            self._builder(_name("lwgpu-test-cluster-ca"), self.key, now)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path = directory / "ca.crt"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        _write_key(directory / "ca.key", self.key)

    def _builder(self, subject: x509.Name, key: Key, now: datetime) -> x509.CertificateBuilder:
        issuer = subject if not hasattr(self, "cert") else self.cert.subject
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + LIFETIME)
        )

    def issue(
        self,
        stem: str,
        common: str,
        organization: str | None = None,
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
    ) -> tuple[Path, Path]:
        """A leaf certificate `dir/stem.crt` + `dir/stem.key`: a server certificate when it
        names hosts, else a client certificate (CN the user, O the group)."""
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.SERVER_AUTH if dns or ips else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            self._builder(_name(common, organization), key, datetime.now(UTC))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if dns or ips:
            names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
            names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = self.dir / f"{stem}.crt", self.dir / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        return cert_path, key_path


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """The key pair that signs (sa.key) and verifies (sa.pub) service-account tokens."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    _write_key(private, key)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public
