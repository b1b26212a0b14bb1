"""Kubernetes resource quantities: read strictly, converted to whole MiB, worded for people.

Strings are held to the apiserver's own grammar (`k8s.io/apimachinery/pkg/api/resource`:
a signed decimal number, then a binary SI suffix, a decimal SI suffix or an exponent),
and values are bounded so a hostile `1e999999999` cannot make us build a gigantic int.
The arithmetic is `kubernetes.utils.parse_quantity`'s (number × 1024^k or 1000^k in
Decimal), written out here because importing `kubernetes.utils` imports the whole
Kubernetes client: about 38 MiB of memory in every server process and 0.3 s of start-up,
for a dozen lines.

The apiserver respells a quantity before admission sees it (`nvidia.com/gpumem: 3000`
arrives as `3k`, `webhook.api.canonical`), so messages word every amount with `amount`,
in the resource's own unit (`3000`), whatever spelling arrives.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from .text import UNRENDERED, as_yaml, shorten, template_in

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


class Unrendered(QuantityError):
    """A Helm template where a quantity belongs: the fix is to render it, not to respell it."""


def with_fix(err: QuantityError, fix: str) -> str:
    """The error and how to write the quantity instead; an unrendered template needs only
    rendering, which its message says."""
    return str(err) if isinstance(err, Unrendered) else f"{err}; {fix}"


def parse(value: object) -> Decimal:
    """Parse a quantity given as YAML/JSON would hand it to us: str, int or float."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{as_yaml(value)} is not a quantity")
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
        if match is None and template_in(value):
            raise Unrendered(f"{shorten(value)!r} {UNRENDERED}")
        if match is None:
            raise QuantityError(f"{shorten(value)!r} is not a Kubernetes quantity")
        scaled = _scaled(match)
        if scaled is None:
            raise QuantityError(f"{shorten(value)!r} is out of range")
        number = scaled
    else:
        raise QuantityError(f"{as_yaml(value)} is not a quantity")
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
        raise QuantityError(f"{amount(value)} must be greater than zero")
    return math.ceil(number / MIB)


def amount(value: object) -> str:
    """A quantity for people: the number of units it asks (`3000`), or, for a binary size
    (`2Gi`), as written.

    The apiserver respells a plain number with a decimal suffix (`nvidia.com/gpumem: 3000`
    reaches the webhook as `3k`, `0.5` as `500m`), which a person reads as thousands or
    thousandths of the resource's unit. A binary suffix comes only from a size its writer gave
    (`2048Mi` arrives as `2Gi`) and stays, so that a message can say what that size meant. A
    value that is no quantity is shown as written (shortened).
    """
    match = (
        _GRAMMAR.fullmatch(value) if isinstance(value, str) and len(value) <= _MAX_TEXT else None
    )
    if match is not None and match["binary"]:
        return shorten(value)
    try:
        number = parse(value)
    except QuantityError:
        return shorten(value)
    text = f"{number:f}"
    return shorten(text.rstrip("0").rstrip(".") if "." in text else text)


def is_size(value: object, unit: int) -> bool:
    """True for a quantity that reads as a byte size of a resource counting `unit` bytes: a
    binary suffix (`2Gi`), or k, M, G, T, P, E on a value of at least one unit (`2G`).

    A binary suffix survives decoding only where it was written. A decimal one is also how the
    apiserver writes a plain number (`nvidia.com/gpumem: 3000` arrives as `3k`), and a size
    below one unit is nothing anyone asks of such a resource: that is a count.
    """
    match = (
        _GRAMMAR.fullmatch(value) if isinstance(value, str) and len(value) <= _MAX_TEXT else None
    )
    if match is None:
        return False
    if match["binary"] is not None:
        return True
    # Milli, micro and nano are no sizes: 500m of a device count is only a fraction.
    if match["decimal"] not in _SIZES:
        return False
    try:
        return parse(value) >= unit
    except QuantityError:  # beyond int64: at least one unit of anything
        return True


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
        raise QuantityError(f"{amount(value)} is not a whole number of devices")
    return int(number)


def unit_bytes(unit: object) -> int:
    """Bytes in one unit of a memory resource: a suffix (`Gi`, `M`) or a quantity (`256Mi`)."""
    if not isinstance(unit, str) or not unit:
        raise QuantityError(f"{as_yaml(unit)} is not a unit such as Gi or Mi")
    text = unit if unit[0].isdigit() or unit[0] == "." else "1" + unit
    try:
        number = parse(text)
    except QuantityError:
        raise QuantityError(f"{shorten(unit)!r} is not a unit such as Gi or Mi") from None
    if number <= 0 or number != number.to_integral_value():
        raise QuantityError(f"{unit!r} is not a whole, positive number of bytes")
    return int(number)
