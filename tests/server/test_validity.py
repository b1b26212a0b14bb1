"""The certificate's expiry read without ``cryptography`` agrees with ``cryptography``'s reading,
on every certificate ``certs`` issues and on any date X.509 can hold, and anything else is a
ValueError (the reloader keeps the previous certificate then)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from hypothesis import given
from hypothesis import strategies as st

from certs.directory import generate
from tests.support.mutate import FUZZ
from webhook.server.state.validity import not_after

KEY = ec.generate_private_key(ec.SECP256R1())
NAME = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "lwgpu-webhook.lwgpu-system.svc")])


def _certificate(until: datetime, *, version_one: bool = False) -> bytes:
    builder = (
        x509.CertificateBuilder()
        .subject_name(NAME)
        .issuer_name(NAME)
        .public_key(KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime(1950, 1, 1, tzinfo=UTC))
        .not_valid_after(until)
    )
    if not version_one:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("lwgpu-webhook.lwgpu-system.svc")]), False
        )
    return builder.sign(KEY, hashes.SHA256()).public_bytes(Encoding.PEM)


@pytest.mark.parametrize("key_type", ["ecdsa-p256", "rsa-2048"])
def test_what_certs_issues_reads_as_cryptography_reads_it(tmp_path: Path, key_type: str) -> None:
    generate(tmp_path, "lwgpu-webhook", "lwgpu-system", key_type=key_type)
    for name in ("tls.crt", "ca.crt"):
        pem = (tmp_path / name).read_bytes()
        assert not_after(pem) == x509.load_pem_x509_certificate(pem).not_valid_after_utc


def test_a_chain_is_read_by_its_first_certificate() -> None:
    leaf = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    chain = _certificate(leaf) + _certificate(datetime(2040, 1, 1, tzinfo=UTC))
    assert not_after(b"# served by lwgpu\n" + chain) == leaf


@pytest.mark.parametrize(
    "until",
    [
        # RFC 5280 4.1.2.5: UTCTime up to 2049, GeneralizedTime from 2050; UTCTime's "50"-"99"
        # are 1950-1999, where strptime's %y would read 2050-2068 for "50"-"68".
        datetime(2049, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(2050, 1, 1, tzinfo=UTC),
        datetime(1950, 6, 1, tzinfo=UTC),
        datetime(1968, 12, 31, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
)
def test_both_time_forms_and_their_centuries(until: datetime) -> None:
    assert not_after(_certificate(until)) == until


def test_a_version_one_certificate_has_no_version_field_to_skip() -> None:
    until = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert not_after(_certificate(until, version_one=True)) == until


@FUZZ
@given(st.datetimes(min_value=datetime(1950, 1, 1), max_value=datetime(9999, 12, 31)))
def test_any_date_reads_back(until: datetime) -> None:
    until = until.replace(microsecond=0, tzinfo=UTC)
    assert not_after(_certificate(until)) == until


PEM = _certificate(datetime(2031, 1, 1, tzinfo=UTC))
DER = x509.load_pem_x509_certificate(PEM).public_bytes(Encoding.DER)


@pytest.mark.parametrize(
    "pem",
    [
        b"",
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        b"-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n",
        PEM.replace(b"-----END CERTIFICATE-----", b""),
    ],
)
def test_no_certificate_is_a_value_error(pem: bytes) -> None:
    with pytest.raises(ValueError):
        not_after(pem)


def _pem(der: bytes) -> bytes:
    return (
        b"-----BEGIN CERTIFICATE-----\n" + base64.b64encode(der) + b"\n-----END CERTIFICATE-----\n"
    )


@FUZZ
@given(st.integers(min_value=0, max_value=len(DER) - 1), st.integers(min_value=0, max_value=255))
def test_a_damaged_certificate_reads_right_or_is_a_value_error(at: int, byte: int) -> None:
    damaged = DER[:at] + bytes([byte]) + DER[at + 1 :]
    try:
        found = not_after(_pem(damaged))
    except ValueError:
        return
    # Never another exception (an IndexError, an OverflowError), never a naive time.
    assert isinstance(found, datetime) and found.tzinfo is UTC


@FUZZ
@given(st.integers(min_value=0, max_value=len(DER) - 1))
def test_a_truncated_certificate_is_a_value_error(length: int) -> None:
    with pytest.raises(ValueError):
        not_after(_pem(DER[:length]))
