"""Kubernetes resource quantities, read strictly and converted to whole MiB.

Strings are held to the apiserver's own grammar (`k8s.io/apimachinery/pkg/api/resource`:
a signed decimal number, then a binary SI suffix, a decimal SI suffix or an exponent),
and values are bounded so a hostile `1e999999999` cannot make us build a gigantic int.
The arithmetic is `kubernetes.utils.parse_quantity`'s (number × 1024^k or 1000^k in
Decimal), written out here because importing `kubernetes.utils` imports the whole
Kubernetes client: about 38 MiB of memory in every server process and 0.3 s of start-up,
for a dozen lines.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from .text import shorten

MIB = 1 << 20

# <signedNumber><suffix>, suffix one of binarySI | decimalSI | decimalExponent.
_GRAMMAR = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?"
)
_BINARY_POWERS = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # of 1024
_DECIMAL_POWERS = {
    "n": -3,
    "u": -2,
    "m": -1,
    "k": 1,
    "M": 2,
    "G": 3,
    "T": 4,
    "P": 5,
    "E": 6,
}  # of 1000
_SIZES = ("k", "M", "G", "T", "P", "E")
# Kubernetes stores quantities as int64 with a scale; anything beyond this is nonsense.
_LIMIT = Decimal(2) ** 63
_INT_LIMIT = 1 << 63
_MAX_TEXT = 64
# An exponent this large would make Decimal build a huge integer.
_MAX_EXPONENT = 30


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or one out of range."""


def parse(value: object) -> Decimal:
    """Parse a quantity given as YAML/JSON would hand it to us: str, int or float."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{shorten(value)} is not a quantity")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{shorten(value)} is not a finite quantity")
        number = Decimal(repr(value))
    elif isinstance(value, str):
        # The usual spelling, a plain number such as "1" or "2048", needs neither the grammar
        # nor the suffix arithmetic (18 digits stay below the int64 bound).
        if len(value) <= 18 and value.isdigit() and value.isascii():
            return Decimal(value)
        match = _GRAMMAR.fullmatch(value) if len(value) <= _MAX_TEXT else None
        if match is None:
            raise QuantityError(f"{shorten(value)!r} is not a Kubernetes quantity")
        scaled = _scaled(match)
        if scaled is None:
            raise QuantityError(f"{shorten(value)!r} is out of range")
        number = scaled
    else:
        raise QuantityError(f"{shorten(value)} ({type(value).__name__}) is not a quantity")
    if abs(number) >= _LIMIT:
        raise QuantityError(f"{shorten(value)} is out of range")
    return number


def _scaled(match: re.Match[str]) -> Decimal | None:
    """The value of a grammatical quantity; None when its exponent is out of range."""
    number = Decimal(match["number"])
    if match["binary"]:
        return number * Decimal(1024) ** _BINARY_POWERS[match["binary"]]
    if match["decimal"]:
        return number * Decimal(1000) ** _DECIMAL_POWERS[match["decimal"]]
    if match["exponent"]:
        # The whole text is a Decimal literal then ("2e3", "+.5E-1").
        return Decimal(match[0]) if abs(int(match["exponent"])) <= _MAX_EXPONENT else None
    return number


def to_mib(value: object, unit_bytes: int = 1) -> int:
    """Return `value` × `unit_bytes` bytes as MiB, rounded up (a GPU must hold all of it)."""
    if type(value) is int and 0 < value * unit_bytes < _INT_LIMIT:
        # The usual case (`aliyun.com/gpu-mem: 2`): exact integer arithmetic, the same
        # result as the Decimal path below, without building Decimals.
        return -(-(value * unit_bytes) // MIB)
    number = parse(value) * unit_bytes
    if number <= 0:
        raise QuantityError(f"{shorten(value)} must be greater than zero")
    return math.ceil(number / MIB)


def is_size(value: object) -> bool:
    """True for a quantity written as a byte size: a binary suffix (`2Gi`) or k, M, G, T, P, E."""
    match = (
        _GRAMMAR.fullmatch(value) if isinstance(value, str) and len(value) <= _MAX_TEXT else None
    )
    # Milli, micro and nano are no sizes: 500m of a device count is only a fraction.
    return match is not None and (match["binary"] is not None or match["decimal"] in _SIZES)


def unit_text(unit: int) -> str:
    """One unit of a memory resource as a quantity: `1Gi`, `1Mi`, `256Mi`, or `N bytes`."""
    if unit % (1 << 30) == 0:
        return f"{unit >> 30}Gi"
    if unit % MIB == 0:
        return f"{unit >> 20}Mi"
    return f"{unit} bytes"


def count(value: object) -> int:
    """Parse a whole, non-negative device count such as `nvidia.com/gpu: "1"`."""
    number = parse(value)
    if number < 0 or number != number.to_integral_value():
        raise QuantityError(f"{shorten(value)} is not a whole number of devices")
    return int(number)


def unit_bytes(unit: object) -> int:
    """Bytes in one unit of a memory resource: a suffix (`Gi`, `M`) or a quantity (`256Mi`)."""
    if not isinstance(unit, str) or not unit:
        raise QuantityError(f"{shorten(unit)} is not a unit such as Gi or Mi")
    text = unit if unit[0].isdigit() or unit[0] == "." else "1" + unit
    try:
        number = parse(text)
    except QuantityError:
        raise QuantityError(f"{shorten(unit)!r} is not a unit such as Gi or Mi") from None
    if number <= 0 or number != number.to_integral_value():
        raise QuantityError(f"{unit!r} is not a whole, positive number of bytes")
    return int(number)
