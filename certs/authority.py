"""Key and certificate creation: a small certificate authority and the webhook's serving cert.

The apiserver only calls a webhook whose certificate chains to the configuration's
``caBundle`` and names the Service's DNS name as a SAN (no Common Name fallback since
Kubernetes 1.19), so the SAN list below is the contract, not a convenience.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .errors import CertError

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
KEY_TYPES = ("ecdsa-p256", "rsa-2048")

# Certificates start a little in the past: the apiserver's clock may run behind the
# clock of the Job that issued them, and a not-yet-valid certificate fails every call.
BACKDATE = timedelta(minutes=5)

# Default lifetimes: a short-lived serving certificate (renewed by the daily rotation under the
# same CA, so a stolen serving key is good for 90 days at most) and a CA long enough that its
# roll, which needs the install to rewrite every caBundle, is a rare event (rotation.py says
# when each is renewed).
SERVING_DAYS = 90
CA_DAYS = 5 * 365

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Spec:
    """What to issue: the Service the certificate is for, lifetimes, extra names, key type."""

    service: str
    namespace: str
    days: int = SERVING_DAYS
    ca_days: int = CA_DAYS
    dns: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    key_type: str = "ecdsa-p256"

    def __post_init__(self) -> None:
        for what, value in (("service", self.service), ("namespace", self.namespace)):
            if not _DNS_LABEL.fullmatch(value):
                raise CertError(
                    f"{what} {value!r} is not a DNS-1123 label (lower case, digits, '-')"
                )
        if self.days <= 0 or self.ca_days <= 0:
            raise CertError("--days and --ca-days must be positive")
        if self.key_type not in KEY_TYPES:
            raise CertError(f"key type {self.key_type!r} is not one of {', '.join(KEY_TYPES)}")
        object.__setattr__(self, "dns", tuple(self.dns))
        object.__setattr__(self, "ips", tuple(self.ips))
        self.ip_addresses()

    def dns_names(self) -> tuple[str, ...]:
        """The SANs the apiserver may use for the Service, then the extra names, without repeats."""
        base = f"{self.service}.{self.namespace}"
        names = (self.service, base, f"{base}.svc", f"{base}.svc.cluster.local", *self.dns)
        return tuple(dict.fromkeys(names))

    def ip_addresses(self) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...]:
        """The extra IP SANs, parsed; a malformed address is a CertError."""
        try:
            return tuple(ipaddress.ip_address(ip) for ip in self.ips)
        except ValueError as exc:
            raise CertError(str(exc)) from None


def new_key(key_type: str) -> PrivateKey:
    """A fresh private key of one of ``KEY_TYPES``."""
    if key_type == "rsa-2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    raise CertError(f"key type {key_type!r} is not one of {', '.join(KEY_TYPES)}")


def key_type_of(key: PrivateKey) -> str | None:
    """The ``KEY_TYPES`` name of a key, or None for a key this tool does not issue."""
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048:
        return "rsa-2048"
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return "ecdsa-p256"
    return None


def issue_ca(spec: Spec, now: datetime) -> tuple[x509.Certificate, PrivateKey]:
    """A self-signed CA (CA:TRUE critical, keyCertSign + cRLSign) valid ``spec.ca_days``."""
    key = new_key(spec.key_type)
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"lwgpu CA {spec.service}.{spec.namespace}")]
    )
    public = key.public_key()
    builder = (
        _base(name, name, public, now, now + timedelta(days=spec.ca_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
    )
    return builder.sign(key, hashes.SHA256()), key


def issue_serving(
    spec: Spec, ca_cert: x509.Certificate, ca_key: PrivateKey, now: datetime
) -> tuple[x509.Certificate, PrivateKey]:
    """A serving certificate signed by the CA; it never outlives its issuer."""
    key = new_key(spec.key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, spec.dns_names()[2])])
    not_after = min(now + timedelta(days=spec.days), ca_cert.not_valid_after_utc)
    sans = [x509.DNSName(n) for n in spec.dns_names()] + [
        x509.IPAddress(ip) for ip in spec.ip_addresses()
    ]
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        _base(name, ca_cert.subject, key.public_key(), now, not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(encipher=isinstance(key, rsa.RSAPrivateKey)), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
    )
    return builder.sign(ca_key, hashes.SHA256()), key


def covers(cert: x509.Certificate, spec: Spec) -> bool:
    """Whether the certificate names every DNS and IP SAN the spec asks for."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(spec.dns_names()) <= set(sans.get_values_for_type(x509.DNSName)) and set(
        spec.ip_addresses()
    ) <= set(sans.get_values_for_type(x509.IPAddress))


def _base(
    subject: x509.Name,
    issuer: x509.Name,
    public: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
    now: datetime,
    not_after: datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


def _key_usage(*, cert_sign: bool = False, encipher: bool = False) -> x509.KeyUsage:
    # RSA key exchange (TLS 1.2 non-ECDHE suites) needs keyEncipherment; ECDSA keys must not
    # carry it.
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=encipher,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )
