"""The renewal rule and the CA bundle across a CA rotation.

Like Gatekeeper's cert-controller, Kyverno's renewer and cert-manager's default
``renewBefore``: a certificate is renewed once less than a third of its lifetime is left. The
rule scales with the lifetime: with the defaults (90-day serving certificates, a 5-year CA) a
serving certificate is renewed from day 60, leaving 30 daily rotation runs to succeed before
it expires, and the CA from about day 1217, some 600 days before it expires, which leaves the
install (the one run that may change the caBundle) many chances to roll it. A renewed CA does
not leave the bundle at once: the old CA stays in ``ca.crt`` until it expires. Serving
certificates are never issued past their CA's expiry (see ``authority.issue_serving``), so by
then every serving certificate it signed has expired too, and no apiserver call fails while
pods still serve the old one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from cryptography import x509

from .authority import PrivateKey, Spec, covers, issue_ca, issue_serving, key_type_of
from .certset import Authority, CertSet, signed_by_any
from .errors import CertError

RENEW_WHEN_LEFT = 1 / 3


@dataclass(frozen=True)
class Plan:
    """What a set needs at a given time; ``reasons`` says why, one line each."""

    renew_ca: bool = False
    renew_serving: bool = False
    retire: tuple[x509.Certificate, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def needed(self) -> bool:
        """Whether anything would be written."""
        return self.renew_ca or self.renew_serving or bool(self.retire)


def fraction_left(cert: x509.Certificate, now: datetime) -> float:
    """Share of the certificate's lifetime still ahead at ``now`` (negative once expired)."""
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return (cert.not_valid_after_utc - now) / lifetime


def due(cert: x509.Certificate, now: datetime) -> bool:
    """The renewal rule: less than a third of the lifetime is left."""
    return fraction_left(cert, now) < RENEW_WHEN_LEFT


def plan(cert_set: CertSet, now: datetime, spec: Spec | None = None) -> Plan:
    """What the set needs at ``now``; with a spec, also whether the serving cert still fits it.

    An expired current CA is a CertError: the webhook is already broken and silently starting
    a new trust chain would hide that; ``generate --force`` or deleting the Secret starts over.
    """
    ca = cert_set.ca
    if ca.not_valid_after_utc <= now:
        raise CertError(f"CA certificate expired at {not_after_text(ca)}")
    reasons = []
    renew_ca = due(ca, now)
    if renew_ca:
        reasons.append(f"CA: less than a third of its lifetime left (expires {not_after_text(ca)})")
    serving = _serving_reasons(cert_set, now, spec)
    reasons += serving
    retire = tuple(old for old in cert_set.ca_bundle[1:] if old.not_valid_after_utc <= now)
    reasons += [f"bundle: old CA expired {not_after_text(old)}, drop it" for old in retire]
    return Plan(renew_ca, renew_ca or bool(serving), retire, tuple(reasons))


def apply(cert_set: CertSet, the_plan: Plan, spec: Spec, now: datetime) -> CertSet:
    """The set after carrying out the plan: new CA first in the bundle, expired CAs dropped."""
    bundle = tuple(ca for ca in cert_set.ca_bundle if ca not in the_plan.retire)
    ca_key = cert_set.ca_key
    if the_plan.renew_ca:
        new_ca, ca_key = issue_ca(spec, now)
        bundle = (new_ca, *bundle)
    result = replace(cert_set, ca_bundle=bundle, ca_key=ca_key)
    if the_plan.renew_serving:
        cert, key = issue_serving(spec, bundle[0], ca_key, now)
        result = replace(result, cert=cert, key=key)
    return result


def ensure(
    existing: CertSet | None, spec: Spec, now: datetime, force: bool = False
) -> tuple[CertSet, bool]:
    """Create a set (none yet, or ``force``) or renew what the rule asks for; True when changed."""
    if existing is None or force:
        ca, ca_key = issue_ca(spec, now)
        cert, key = issue_serving(spec, ca, ca_key, now)
        return CertSet((ca,), ca_key, cert, key), True
    the_plan = plan(existing, now, spec)
    if not the_plan.needed:
        return existing, False
    return apply(existing, the_plan, spec, now), True


def from_parts(
    authority: Authority,
    serving: tuple[x509.Certificate, PrivateKey] | None,
    spec: Spec,
    now: datetime,
) -> tuple[CertSet, bool]:
    """The set of a CA and the serving pair stored apart from it; True when the pair had to be
    issued: none was stored, or no CA of the bundle signed it (the CA was replaced)."""
    if serving is not None and signed_by_any(serving[0], authority.bundle):
        return CertSet(authority.bundle, authority.key, *serving), False
    cert, key = issue_serving(spec, authority.bundle[0], authority.key, now)
    return CertSet(authority.bundle, authority.key, cert, key), True


def renew_serving(cert_set: CertSet, spec: Spec, now: datetime) -> tuple[CertSet, tuple[str, ...]]:
    """The daily rotation's share of the plan: the serving certificate re-issued under the
    current CA when it is due; never the CA, whose change needs a new caBundle. Returns the
    set and the reasons left to the install (a CA due, old CAs to drop)."""
    the_plan = plan(cert_set, now, spec)
    serving = _serving_reasons(cert_set, now, spec)
    left = tuple(reason for reason in the_plan.reasons if reason not in serving)
    if not serving:
        return cert_set, left
    return apply(cert_set, Plan(renew_serving=True), spec, now), left


def _serving_reasons(cert_set: CertSet, now: datetime, spec: Spec | None) -> list[str]:
    cert = cert_set.cert
    reasons = []
    if due(cert, now):
        reasons.append(
            "serving certificate: less than a third of its lifetime left "
            f"(expires {not_after_text(cert)})"
        )
    if cert_set.issuer_of_cert() != cert_set.ca:
        reasons.append("serving certificate: signed by an old CA, re-issue under the current one")
    if spec is not None and not covers(cert, spec):
        reasons.append("serving certificate: does not name every requested DNS name and IP")
    if spec is not None and key_type_of(cert_set.key) != spec.key_type:
        reasons.append(f"serving certificate: key type differs from {spec.key_type}")
    return reasons


def not_after_text(cert: x509.Certificate) -> str:
    """When `cert` expires, as every message of this package writes it (UTC)."""
    return f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M:%SZ}"
