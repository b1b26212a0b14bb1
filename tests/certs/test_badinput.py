"""Bad certificate files: one clear line on stderr, exit 2, and nothing overwritten."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from certs import generate, load_dir
from tests.support.certs import run_certs

FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")


def _encrypted_key(directory: Path) -> bytes:
    key = load_dir(directory).key
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )


def _unreadable(path: Path) -> None:
    # Running as root, a 0000 mode would not stop a read; a directory in its place does.
    path.unlink()
    path.mkdir()


# (file, how to break it: "other" copies it from an unrelated set, bytes overwrite it, or a
# named break below)
CASES = [
    (
        "tls.key",
        b"-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n",
        "not a readable PEM private key",
    ),
    ("tls.key", "encrypted", "private key is encrypted"),
    ("tls.key", "unreadable", "cannot read"),
    ("tls.key", "other", "tls.key does not match tls.crt"),
    ("ca.key", "other", "ca.key does not match any certificate in ca.crt"),
    ("ca.crt", b"hello, not a certificate\n", "ca.crt: not a PEM certificate"),
    ("tls.crt", b"", "tls.crt: not a PEM certificate"),
    ("ca.crt", "other", "ca.key does not match any certificate in ca.crt"),
    ("tls.crt", "other-pair", "tls.crt is not signed by any CA in ca.crt"),
    ("tls.crt", "missing", "incomplete certificate set, missing tls.crt"),
]


def _break(good: Path, other: Path, name: str, how) -> None:
    target = good / name
    if how == "other":
        target.write_bytes((other / name).read_bytes())
    elif how == "other-pair":
        for pair_file in ("tls.crt", "tls.key"):
            (good / pair_file).write_bytes((other / pair_file).read_bytes())
    elif how == "encrypted":
        target.write_bytes(_encrypted_key(good))
    elif how == "unreadable":
        _unreadable(target)
    elif how == "missing":
        target.unlink()
    else:
        target.write_bytes(how)


def _snapshot(directory: Path) -> dict[str, tuple[bytes | None, int]]:
    return {
        n: (
            (directory / n).read_bytes() if (directory / n).is_file() else None,
            (directory / n).stat().st_mtime_ns if (directory / n).exists() else 0,
        )
        for n in FILES
    }


GENERATE = ("generate", "--service", "lwgpu", "--namespace", "lwgpu-system", "--out")


@pytest.mark.parametrize("command", ["generate", "check"])
@pytest.mark.parametrize("name, how, message", CASES)
def test_bad_files_are_refused_and_left_alone(tmp_path, command, name, how, message):
    good, other = tmp_path / "good", tmp_path / "other"
    generate(good, "lwgpu", "lwgpu-system")
    generate(other, "lwgpu", "lwgpu-system")
    _break(good, other, name, how)
    before = _snapshot(good)
    result = (
        run_certs(*GENERATE, str(good)) if command == "generate" else run_certs("check", str(good))
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith(f"python -m certs {command}: error: ")
        and message in lines[0]
    ), result.stderr
    assert _snapshot(good) == before


@pytest.mark.parametrize("command", ["generate", "check"])
def test_expired_ca_is_refused(tmp_path, command):
    generate(
        tmp_path,
        "lwgpu",
        "lwgpu-system",
        days=5,
        ca_days=10,
        now=datetime.now(UTC) - timedelta(days=20),
    )
    before = _snapshot(tmp_path)
    result = (
        run_certs(*GENERATE, str(tmp_path))
        if command == "generate"
        else run_certs("check", str(tmp_path))
    )
    assert result.returncode == 2
    assert (
        "CA certificate expired at" in result.stderr
        and len(result.stderr.strip().splitlines()) == 1
    )
    assert _snapshot(tmp_path) == before


def test_force_replaces_a_broken_set(tmp_path):
    generate(tmp_path, "lwgpu", "lwgpu-system")
    (tmp_path / "tls.key").write_bytes(b"garbage")
    result = run_certs(*GENERATE, str(tmp_path), "--force")
    assert result.returncode == 0, result.stderr
    assert load_dir(tmp_path).cert.subject.rfc4514_string() == "CN=lwgpu.lwgpu-system.svc"


def test_check_on_an_empty_directory(tmp_path):
    result = run_certs("check", str(tmp_path))
    assert result.returncode == 2 and "no certificate set" in result.stderr
