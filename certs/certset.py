"""A certificate set as files: CA bundle, CA key, serving certificate and key, checked on load.

The same four names are the file names in a directory and the data keys of the
``kubernetes.io/tls`` Secret, so one codec serves both places. ``ca.key`` travels with the
set because renewing the serving certificate under the same CA needs it (as Gatekeeper's
cert-controller keeps it); ``ca.crt`` may hold several CAs while an old one is retired.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from .authority import PrivateKey, key_type_of
from .errors import CertError

CA_CRT, CA_KEY, TLS_CRT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
FILE_NAMES = (CA_CRT, CA_KEY, TLS_CRT, TLS_KEY)
SECRET_KEYS = frozenset({CA_KEY, TLS_KEY})


@dataclass(frozen=True)
class CertSet:
    """A consistent set: ``ca_bundle[0]`` is the CA of ``ca_key``; ``cert`` chains to the bundle."""

    ca_bundle: tuple[x509.Certificate, ...]
    ca_key: PrivateKey
    cert: x509.Certificate
    key: PrivateKey

    @property
    def ca(self) -> x509.Certificate:
        """The current CA, the one new serving certificates are signed with."""
        return self.ca_bundle[0]

    def bundle_pem(self) -> bytes:
        """Every CA the apiserver must trust, PEM, current first."""
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.ca_bundle)

    def ca_bundle_b64(self) -> str:
        """The ``caBundle`` field of a webhook configuration: base64 of the PEM bundle."""
        return base64.b64encode(self.bundle_pem()).decode("ascii")

    def issuer_of_cert(self) -> x509.Certificate:
        """The CA in the bundle that signed the serving certificate."""
        return next(ca for ca in self.ca_bundle if _issued_by(self.cert, ca))

    def to_files(self) -> dict[str, bytes]:
        """File name -> PEM bytes, keys as unencrypted PKCS#8."""
        return {
            CA_CRT: self.bundle_pem(),
            CA_KEY: _key_pem(self.ca_key),
            TLS_CRT: self.cert.public_bytes(serialization.Encoding.PEM),
            TLS_KEY: _key_pem(self.key),
        }

    @classmethod
    def from_files(cls, files: Mapping[str, bytes], source: str) -> CertSet:
        """Parse and cross-check the four files; ``source`` names where they came from in errors."""
        missing = [name for name in FILE_NAMES if name not in files]
        if missing:
            raise CertError(f"{source}: incomplete certificate set, missing {', '.join(missing)}")
        bundle = _load_certs(files[CA_CRT], f"{source}/{CA_CRT}")
        certs = _load_certs(files[TLS_CRT], f"{source}/{TLS_CRT}")
        ca_key = _load_key(files[CA_KEY], f"{source}/{CA_KEY}")
        key = _load_key(files[TLS_KEY], f"{source}/{TLS_KEY}")
        current = [ca for ca in bundle if _same_public_key(ca, ca_key)]
        if not current:
            raise CertError(f"{source}: {CA_KEY} does not match any certificate in {CA_CRT}")
        if not _is_ca(current[0]):
            raise CertError(f"{source}: the {CA_CRT} certificate matching {CA_KEY} is not a CA")
        cert = certs[0]
        if not _same_public_key(cert, key):
            raise CertError(f"{source}: {TLS_KEY} does not match {TLS_CRT}")
        if not any(_issued_by(cert, ca) for ca in bundle):
            raise CertError(f"{source}: {TLS_CRT} is not signed by any CA in {CA_CRT}")
        ordered = (current[0], *(ca for ca in bundle if ca != current[0]))
        return cls(ordered, ca_key, cert, key)


def _load_certs(data: bytes, where: str) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise CertError(f"{where}: not a PEM certificate") from None
    return certs


def _load_key(data: bytes, where: str) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise CertError(
            f"{where}: private key is encrypted; an unencrypted key is required"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise CertError(f"{where}: not a readable PEM private key") from None
    # The loader returns any key type; only EC and RSA ones are a PrivateKey, and of those
    # key_type_of accepts only the curve and size this tool issues.
    if not isinstance(key, PrivateKey) or key_type_of(key) is None:
        raise CertError(f"{where}: unsupported key type; use ECDSA P-256 or RSA 2048")
    return key


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _same_public_key(cert: x509.Certificate, key: PrivateKey) -> bool:
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return cert.public_key().public_bytes(*spki) == key.public_key().public_bytes(*spki)


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
