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


MIB, GIB = 1 << 20, 1 << 30


@pytest.mark.parametrize(
    "value, unit, size",
    [
        ("2Gi", MIB, True),
        ("1Ki", MIB, True),
        ("1Ki", GIB, True),  # a binary suffix is only ever its writer's
        ("2G", MIB, True),
        ("2G", GIB, True),
        ("500M", MIB, True),
        ("3k", MIB, False),  # nvidia.com/gpumem: 3000 as the apiserver writes it
        ("16k", GIB, False),
        ("500k", MIB, False),
        ("1M", MIB, False),  # 10^6 bytes, under one MiB
        ("1G", GIB, False),  # 10^9 bytes, under one GiB
        ("2e3", MIB, False),  # an exponent is a plain number
        ("2048", MIB, False),
        (2048, MIB, False),
        ("500m", MIB, False),  # a fraction of a count, not a size
        ("2Gb", MIB, False),
        ("x" * 1000 + "Gi", MIB, False),
    ],
)
def test_is_size(value, unit, size):
    """A byte size has a binary suffix, or k, M, G, T, P, E on at least one unit's bytes: the
    apiserver writes plain numbers with decimal suffixes (3000 arrives as 3k)."""
    assert quantity.is_size(value, unit) is size


@pytest.mark.parametrize(
    "value, shown",
    [
        ("3k", "3000"),  # HAMI's nvidia.com/gpumem: 3000 as the webhook receives it
        (3000, "3000"),
        ("16k", "16000"),
        ("500m", "0.5"),
        ("1500m", "1.5"),
        ("100u", "0.0001"),
        ("2", "2"),
        ("1e3", "1000"),
        ("2G", "2000000000"),
        ("-3k", "-3000"),
        ("2Gi", "2Gi"),  # a binary size stays as written: messages say what it meant
        ("1536Mi", "1536Mi"),
        ("abc", "abc"),  # no quantity: as written
        ("x" * 100, "x" * 39 + "…"),
    ],
)
def test_amount(value, shown):
    """A quantity for people: the number of units, not the apiserver's decimal suffix."""
    assert quantity.amount(value) == shown


def test_messages_word_amounts_in_units():
    """A count or a size refused is named by its amount, not by the apiserver's spelling."""
    with pytest.raises(quantity.QuantityError, match=r"^0\.5 is not a whole number of devices"):
        quantity.count("500m")
    with pytest.raises(quantity.QuantityError, match=r"^-3000 must be greater than zero"):
        quantity.to_mib("-3k", MIB)


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
