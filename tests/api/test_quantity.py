"""Quantity parsing: the apiserver's grammar, MiB conversion, device counts and units."""

import pytest

from webhook.api import quantity


@pytest.mark.parametrize(
    "value, unit, mib",
    [
        (2, 1 << 30, 2048),
        ("2", 1 << 30, 2048),
        ("1.5", 1 << 30, 1536),
        (1.5, 1 << 30, 1536),
        ("1.5Gi", 1, 1536),
        ("1536Mi", 1, 1536),
        ("500M", 1, 477),  # 500e6 bytes = 476.8 MiB, rounded up
        ("2e3", 1 << 20, 2000),
        ("2E3", 1 << 20, 2000),
        (".5Gi", 1, 512),
        ("5.Gi", 1, 5120),
        ("+1Gi", 1, 1024),
        ("1", 1, 1),  # one byte still needs one MiB of GPU
        ("3000", 1 << 20, 3000),
    ],
)
def test_to_mib(value, unit, mib):
    assert quantity.to_mib(value, unit) == mib


@pytest.mark.parametrize(
    "value, message",
    [
        ("abc", "is not a Kubernetes quantity"),
        ("", "is not a Kubernetes quantity"),
        (" 2", "is not a Kubernetes quantity"),
        ("2 ", "is not a Kubernetes quantity"),
        ("1_000", "is not a Kubernetes quantity"),
        ("NaN", "is not a Kubernetes quantity"),
        ("1.5.5", "is not a Kubernetes quantity"),
        ("1ki", "is not a Kubernetes quantity"),
        ("1Ee3", "is not a Kubernetes quantity"),
        ("1e999999999", "out of range"),
        ("9" * 30 + "Ei", "out of range"),
        ("1" * 100, "is not a Kubernetes quantity"),
        (float("inf"), "not a finite quantity"),
        (True, "is not a quantity"),
        (None, "is not a quantity"),
        ([2], "is not a quantity"),
        ({"a": 1}, "is not a quantity"),
        ("-1Gi", "must be greater than zero"),
        ("0", "must be greater than zero"),
    ],
)
def test_to_mib_rejects(value, message):
    with pytest.raises(quantity.QuantityError, match=message):
        quantity.to_mib(value)


def test_messages_never_echo_unbounded_input():
    with pytest.raises(quantity.QuantityError) as err:
        quantity.to_mib("x" * 100_000)
    assert len(str(err.value)) < 120


@pytest.mark.parametrize("value, expected", [(1, 1), ("1", 1), ("2", 2), (0, 0), ("4e0", 4)])
def test_count(value, expected):
    assert quantity.count(value) == expected


@pytest.mark.parametrize("value", ["0.5", "-1", "1.5", "x", None, "100m"])
def test_count_rejects(value):
    with pytest.raises(quantity.QuantityError):
        quantity.count(value)


@pytest.mark.parametrize(
    "unit, size",
    [
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1024),
        ("M", 10**6),
        ("256Mi", 256 << 20),
        ("1", 1),
    ],
)
def test_unit_bytes(unit, size):
    assert quantity.unit_bytes(unit) == size


@pytest.mark.parametrize("unit", ["", "Gb", "m", 2, None, "0Mi", "-1Gi", "1.5"])
def test_unit_bytes_rejects(unit):
    with pytest.raises(quantity.QuantityError):
        quantity.unit_bytes(unit)


@pytest.mark.parametrize(
    "value, size",
    [
        ("2Gi", True),
        ("1Ki", True),
        ("2G", True),
        ("500k", True),
        ("2e3", False),  # an exponent is a plain number
        ("2048", False),
        (2048, False),
        ("500m", False),  # a fraction of a count, not a size
        ("2Gb", False),
        ("x" * 1000 + "Gi", False),
    ],
)
def test_is_size(value, size):
    """A byte size is a value with a binary suffix or k, M, G, T, P, E; nothing else."""
    assert quantity.is_size(value) is size


@pytest.mark.parametrize(
    "unit, text",
    [
        (1 << 30, "1Gi"),
        (1 << 20, "1Mi"),
        (256 << 20, "256Mi"),
        (3 << 30, "3Gi"),
        (1000, "1000 bytes"),
    ],
)
def test_unit_text(unit, text):
    """One unit of a memory resource as the user would write it."""
    assert quantity.unit_text(unit) == text
