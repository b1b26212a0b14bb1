"""When a PEM certificate expires: its ``notAfter``, read with the standard library alone.

The server needs one field of its certificate, for ``lwgpu_certificate_expiry_seconds``.
``cryptography`` reads it in one call but maps about 8 MiB into every process that imports
it (its Rust extension), and the server imports it for nothing else: the TLS context itself
is OpenSSL's, through ``ssl``. So this module walks the few DER headers in front of the
field instead. It reads, it never judges: OpenSSL verifies the same certificate when
``tls.build_context`` loads it, and the certificate authority is ``certs``' (with
``cryptography``).

RFC 5280 section 4.1: ``Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
OPTIONAL, serialNumber INTEGER, signature AlgorithmIdentifier, issuer Name, validity
SEQUENCE { notBefore Time, notAfter Time }, ... } ... }``, a Time being a UTCTime
(``YYMMDDHHMMSSZ``, years 1950 to 2049) or a GeneralizedTime (``YYYYMMDDHHMMSSZ``).
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)
SEQUENCE, INTEGER, VERSION, UTC_TIME, GENERALIZED_TIME = 0x30, 0x02, 0xA0, 0x17, 0x18
_FORMATS = {UTC_TIME: "%y%m%d%H%M%SZ", GENERALIZED_TIME: "%Y%m%d%H%M%SZ"}


def not_after(pem: bytes) -> datetime:
    """The ``notAfter`` of the first certificate in ``pem`` (UTC); ValueError if unreadable."""
    match = _PEM.search(pem)
    if match is None:
        raise ValueError("no PEM CERTIFICATE block")
    try:
        der = base64.b64decode(b"".join(match.group(1).split()), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"the certificate is not base64: {exc}") from None
    _, certificate, _ = _element(der, 0, SEQUENCE)
    _, tbs, _ = _element(der, certificate, SEQUENCE)
    at = tbs
    if at < len(der) and der[at] == VERSION:
        at = _element(der, at, VERSION)[2]
    at = _element(der, at, INTEGER)[2]  # serialNumber
    at = _element(der, at, SEQUENCE)[2]  # signature
    at = _element(der, at, SEQUENCE)[2]  # issuer
    _, validity, _ = _element(der, at, SEQUENCE)
    after = _element(der, validity, None)[2]  # notBefore
    tag, start, end = _element(der, after, None)
    if tag not in _FORMATS:
        raise ValueError(f"notAfter has ASN.1 tag {tag:#04x}, not a UTCTime or GeneralizedTime")
    try:
        text = der[start:end].decode("ascii")
        # strptime's %y maps 69-99 to 19xx; RFC 5280 maps 50-99 (a UTCTime is 1950-2049).
        moment = datetime.strptime(text, _FORMATS[tag])
    except ValueError as exc:  # UnicodeDecodeError is one too
        raise ValueError(f"notAfter is not a time: {exc}") from None
    if tag == UTC_TIME:
        moment = moment.replace(
            year=(1900 if moment.year % 100 >= 50 else 2000) + moment.year % 100
        )
    return moment.replace(tzinfo=UTC)


def _element(der: bytes, at: int, tag: int | None) -> tuple[int, int, int]:
    """The DER element at ``at``: its tag, where its contents start and where it ends."""
    if at + 2 > len(der):
        raise ValueError("the certificate ends early")
    found, length, start = der[at], der[at + 1], at + 2
    if tag is not None and found != tag:
        raise ValueError(f"expected ASN.1 tag {tag:#04x} at byte {at}, found {found:#04x}")
    if length & 0x80:
        octets = length & 0x7F
        if not 1 <= octets <= 4 or start + octets > len(der):
            raise ValueError(f"bad DER length at byte {at}")
        length, start = int.from_bytes(der[start : start + octets], "big"), start + octets
    if start + length > len(der):
        raise ValueError("the certificate ends early")
    return found, start, start + length
