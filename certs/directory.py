"""Certificate sets kept in a directory: ``generate`` (create or renew) and ``check`` (report)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime

from cryptography import x509

from .authority import CA_DAYS, SERVING_DAYS, Spec
from .errors import CertError
from .rotation import Plan, ensure, not_after_text, plan
from .store import load_dir, write_dir


def generate(
    out_dir: str | os.PathLike[str],
    service: str,
    namespace: str,
    *,
    days: int = SERVING_DAYS,
    ca_days: int = CA_DAYS,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    key_type: str = "ecdsa-p256",
    force: bool = False,
    now: datetime | None = None,
) -> bool:
    """Write ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` into ``out_dir``; True when written.

    A valid set that names every requested SAN and is not due for renewal is left alone;
    one that is due is renewed by the rotation rule (old CA kept in ``ca.crt``). ``force``
    starts over with a new CA. Bad existing files raise CertError and nothing is written.
    """
    spec = Spec(service, namespace, days, ca_days, tuple(dns), tuple(ips), key_type)
    now = now or datetime.now(UTC)
    existing = None if force else load_dir(out_dir)
    cert_set, changed = ensure(existing, spec, now, force)
    if changed:
        write_dir(out_dir, cert_set)
    return changed


def check(directory: str | os.PathLike[str], now: datetime | None = None) -> tuple[list[str], Plan]:
    """Expiry lines for every certificate in the directory, and what the rotation rule would do."""
    cert_set = load_dir(directory)
    if cert_set is None:
        raise CertError(f"{directory}: no certificate set (ca.crt, ca.key, tls.crt, tls.key)")
    now = now or datetime.now(UTC)
    lines = [_expiry("serving certificate", cert_set.cert, now)]
    lines += [
        _expiry("CA" if i == 0 else "old CA", ca, now) for i, ca in enumerate(cert_set.ca_bundle)
    ]
    return lines, plan(cert_set, now)


def _expiry(label: str, cert: x509.Certificate, now: datetime) -> str:
    left = cert.not_valid_after_utc - now
    expires = not_after_text(cert)
    return f"{label}: {cert.subject.rfc4514_string()} expires {expires} ({left.days} days left)"
