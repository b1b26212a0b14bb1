"""A certificate set as files: CA bundle, CA key, serving certificate and key, checked on load.

The same four names are the file names in a directory and the data keys of the Secrets the
installer keeps, so one codec serves both places. In a directory (development) the four live
together. In the cluster they are split by who must read them: the CA (``ca.crt``, ``ca.key``:
an ``Authority``) in a Secret only the certificate Jobs read, since renewing the serving
certificate under the same CA needs the key (as Gatekeeper's cert-controller keeps it), and
``tls.crt``/``tls.key`` in the Secret the webhook mounts. ``ca.crt`` may hold several CAs
while an old one is retired.
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
class Authority:
    """A CA that signs: ``bundle[0]`` is the certificate of ``key``; the rest are older CAs
    still trusted until they expire."""

    bundle: tuple[x509.Certificate, ...]
    key: PrivateKey

    def bundle_pem(self) -> bytes:
        """Every CA the apiserver must trust, PEM, current first."""
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.bundle)

    def to_files(self) -> dict[str, bytes]:
        """``ca.crt`` and ``ca.key`` (unencrypted PKCS#8)."""
        return {CA_CRT: self.bundle_pem(), CA_KEY: _key_pem(self.key)}

    @classmethod
    def from_files(cls, files: Mapping[str, bytes], source: str) -> Authority:
        """Parse ``ca.crt`` and ``ca.key`` and check that the key is a CA's in the bundle."""
        missing = [name for name in (CA_CRT, CA_KEY) if name not in files]
        if missing:
            raise CertError(f"{source}: incomplete CA, missing {', '.join(missing)}")
        bundle = _load_certs(files[CA_CRT], f"{source}/{CA_CRT}")
        key = _load_key(files[CA_KEY], f"{source}/{CA_KEY}")
        current = [ca for ca in bundle if _same_public_key(ca, key)]
        if not current:
            raise CertError(f"{source}: {CA_KEY} does not match any certificate in {CA_CRT}")
        if not _is_ca(current[0]):
            raise CertError(f"{source}: the {CA_CRT} certificate matching {CA_KEY} is not a CA")
        return cls((current[0], *(ca for ca in bundle if ca != current[0])), key)


def load_serving(
    files: Mapping[str, bytes], source: str
) -> tuple[x509.Certificate, PrivateKey] | None:
    """The serving certificate and key of ``tls.crt``/``tls.key``; None when both are absent.

    One without the other, a file that does not parse, or a key that does not match is a
    CertError: what cannot be read is never overwritten.
    """
    present = [name for name in (TLS_CRT, TLS_KEY) if name in files]
    if not present:
        return None
    if len(present) == 1:
        missing = TLS_KEY if present == [TLS_CRT] else TLS_CRT
        raise CertError(f"{source}: incomplete certificate set, missing {missing}")
    return _load_pair(files, source)


def _load_pair(files: Mapping[str, bytes], source: str) -> tuple[x509.Certificate, PrivateKey]:
    cert = _load_certs(files[TLS_CRT], f"{source}/{TLS_CRT}")[0]
    key = _load_key(files[TLS_KEY], f"{source}/{TLS_KEY}")
    if not _same_public_key(cert, key):
        raise CertError(f"{source}: {TLS_KEY} does not match {TLS_CRT}")
    return cert, key


def signed_by_any(cert: x509.Certificate, bundle: tuple[x509.Certificate, ...]) -> bool:
    """Whether a CA of the bundle signed the certificate."""
    return any(_issued_by(cert, ca) for ca in bundle)


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

    @property
    def authority(self) -> Authority:
        """The CA part of the set: what the CA Secret holds."""
        return Authority(self.ca_bundle, self.ca_key)

    def bundle_pem(self) -> bytes:
        """Every CA the apiserver must trust, PEM, current first."""
        return self.authority.bundle_pem()

    def serving_files(self) -> dict[str, bytes]:
        """``tls.crt`` and ``tls.key``: what the Secret the webhook mounts holds."""
        return {
            TLS_CRT: self.cert.public_bytes(serialization.Encoding.PEM),
            TLS_KEY: _key_pem(self.key),
        }

    def ca_bundle_b64(self) -> str:
        """The ``caBundle`` field of a webhook configuration: base64 of the PEM bundle."""
        return base64.b64encode(self.bundle_pem()).decode("ascii")

    def issuer_of_cert(self) -> x509.Certificate:
        """The CA in the bundle that signed the serving certificate."""
        return next(ca for ca in self.ca_bundle if _issued_by(self.cert, ca))

    def to_files(self) -> dict[str, bytes]:
        """File name -> PEM bytes, keys as unencrypted PKCS#8."""
        return {**self.authority.to_files(), **self.serving_files()}

    @classmethod
    def from_files(cls, files: Mapping[str, bytes], source: str) -> CertSet:
        """Parse and cross-check the four files; ``source`` names where they came from in errors."""
        missing = [name for name in FILE_NAMES if name not in files]
        if missing:
            raise CertError(f"{source}: incomplete certificate set, missing {', '.join(missing)}")
        authority = Authority.from_files(files, source)
        cert, key = _load_pair(files, source)
        if not signed_by_any(cert, authority.bundle):
            raise CertError(f"{source}: {TLS_CRT} is not signed by any CA in {CA_CRT}")
        return cls(authority.bundle, authority.key, cert, key)


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
