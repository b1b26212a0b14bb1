"""The rotation rule with a fake clock, and a CA rotation that keeps old serving certs trusted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from certs import CertSet, Spec, check, ensure, generate, load_dir, plan
from certs.authority import issue_ca, issue_serving
from certs.store import write_dir
from tests.support.certs import (
    SANS,
    handshake,
    needs_openssl,
    openssl_verify,
    run_certs,
    tls_server,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SPEC = Spec("lwgpu", "lwgpu-system", days=30, ca_days=300)


def at_fraction(cert, fraction: float) -> datetime:
    """The moment when ``fraction`` of the certificate's lifetime has passed."""
    return cert.not_valid_before_utc + fraction * (
        cert.not_valid_after_utc - cert.not_valid_before_utc
    )


def make_set(ca_at: datetime = T0, serving_at: datetime = T0) -> CertSet:
    """A CA issued at ``ca_at`` and a serving certificate it signed at ``serving_at``."""
    ca, ca_key = issue_ca(SPEC, ca_at)
    cert, key = issue_serving(SPEC, ca, ca_key, serving_at)
    return CertSet((ca,), ca_key, cert, key)


@pytest.mark.parametrize(
    "fraction, renew", [(0.5, False), (0.6, False), (0.7, True), (0.95, True), (1.2, True)]
)
def test_serving_certificate_renewed_past_two_thirds(fraction, renew):
    cert_set = make_set()
    now = at_fraction(cert_set.cert, fraction)
    the_plan = plan(cert_set, now, SPEC)
    assert (the_plan.renew_serving, the_plan.renew_ca) == (renew, False)
    renewed, changed = ensure(cert_set, SPEC, now)
    assert changed is renew
    assert (renewed.cert != cert_set.cert) is renew
    assert renewed.ca_bundle == cert_set.ca_bundle, "the CA stays while it is not due"


@pytest.mark.parametrize("fraction, renew", [(0.5, False), (0.7, True)])
def test_ca_renewed_past_two_thirds_and_old_ca_kept(fraction, renew):
    probe = make_set()
    now = at_fraction(probe.ca, fraction)
    # A serving certificate issued shortly before, so that only the CA can be due.
    cert_set = make_set(T0, now - timedelta(days=1))
    the_plan = plan(cert_set, now, SPEC)
    assert the_plan.renew_ca is renew and the_plan.renew_serving is renew
    renewed, changed = ensure(cert_set, SPEC, now)
    assert changed is renew
    if renew:
        assert renewed.ca_bundle[1:] == cert_set.ca_bundle and renewed.ca != cert_set.ca
        assert renewed.issuer_of_cert() == renewed.ca
        assert any("CA: less than a third" in r for r in the_plan.reasons)


def test_old_ca_retired_once_expired():
    rotated, _ = ensure(make_set(), SPEC, at_fraction(make_set().ca, 0.7))
    old_ca = rotated.ca_bundle[1]
    before = plan(rotated, old_ca.not_valid_after_utc - timedelta(seconds=1), SPEC)
    assert before.retire == ()
    after_expiry = old_ca.not_valid_after_utc
    cert_set = ensure(rotated, SPEC, after_expiry - timedelta(days=1))[0]
    the_plan = plan(cert_set, after_expiry, SPEC)
    assert the_plan.retire == (old_ca,)
    assert ensure(cert_set, SPEC, after_expiry)[0].ca_bundle == (cert_set.ca,)


@needs_openssl
@pytest.mark.parametrize("served", ["old", "new"])
def test_rotated_bundle_verifies_old_and_new_serving_certificates(tmp_path, served):
    rotate_at = at_fraction(make_set().ca, 0.7)
    old_set = make_set(T0, rotate_at - timedelta(days=1))
    new_set, changed = ensure(old_set, SPEC, rotate_at)
    assert changed and new_set.ca_bundle == (new_set.ca, old_set.ca)
    write_dir(tmp_path / "old", old_set)
    write_dir(tmp_path / "new", new_set)
    # -attime: the fake clock's "now", when both serving certificates are within their validity.
    result = openssl_verify(
        tmp_path / "new" / "ca.crt",
        tmp_path / served / "tls.crt",
        "-attime",
        str(int(rotate_at.timestamp())),
    )
    assert result.returncode == 0, result.stderr


def test_check_reports_expiry_and_reasons(tmp_path):
    generate(tmp_path, "lwgpu", "lwgpu-system", days=30, ca_days=300, now=T0)
    cert = load_dir(tmp_path).cert
    lines, quiet = check(tmp_path, at_fraction(cert, 0.5))
    assert [line.split(":")[0] for line in lines] == ["serving certificate", "CA"]
    assert not quiet.needed and quiet.reasons == ()
    _, due = check(tmp_path, at_fraction(cert, 0.7))
    assert due.needed and due.reasons[0].startswith("serving certificate: less than a third")


@pytest.mark.parametrize(
    "issued_days_ago, code, last_line",
    [(1, 0, "nothing to renew"), (25, 1, "renew: serving certificate")],
)
def test_check_cli_exit_code(tmp_path, issued_days_ago, code, last_line):
    issued = datetime.now(UTC) - timedelta(days=issued_days_ago)
    generate(tmp_path, "lwgpu", "lwgpu-system", days=30, now=issued)
    result = run_certs("check", tmp_path)
    assert result.returncode == code, result.stderr
    assert result.stdout.splitlines()[-1].startswith(last_line)


@needs_openssl
def test_handshake_with_real_clock_after_ca_rotation(tmp_path):
    """Both serving certificates valid now: old from the old CA, new from the rotated one."""
    now = datetime.now(UTC)
    generate(
        tmp_path / "old",
        "lwgpu",
        "lwgpu-system",
        days=30,
        ca_days=3,
        now=now - timedelta(days=2, hours=12),
    )
    old_set = load_dir(tmp_path / "old")
    write_dir(tmp_path / "new", old_set)
    assert generate(tmp_path / "new", "lwgpu", "lwgpu-system", days=30, ca_days=3, now=now) is True
    assert len(load_dir(tmp_path / "new").ca_bundle) == 2
    for served in ("old", "new"):
        result = openssl_verify(tmp_path / "new" / "ca.crt", tmp_path / served / "tls.crt")
        assert result.returncode == 0, result.stderr
        with tls_server(tmp_path / served / "tls.crt", tmp_path / served / "tls.key") as port:
            assert handshake(port, tmp_path / "new" / "ca.crt", SANS[2]) == b"ok"
