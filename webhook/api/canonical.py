"""Resource quantities as the apiserver stores them, and so as admission receives them.

The apiserver decodes every quantity into apimachinery's `resource.Quantity` and writes it
back in canonical form: `nvidia.com/gpumem: 3000` reaches a webhook as `3k`, `2048Mi` as
`2Gi`, `1.5Gi` as `1536Mi`, `0.5` as `500m`. `canonical` follows that code step by step
(k8s.io/apimachinery/pkg/api/resource, quantity.go, suffix.go, amount.go, math.go):
`Quantity.UnmarshalJSON` trims white space and calls `ParseQuantity`, which scans with
`parseQuantityString`, keeps the suffix's `Format` (BinarySI, DecimalSI, DecimalExponent)
and, for input already canonical, the text itself (`+1Ki` stays `+1Ki`); `String` renders
the rest with `CanonicalizeBytes`. Values are exact integers with a power of ten (`unscaled`,
`scale`: unscaled × 10^scale, `int64Amount`'s naming), never a power built from a user's
exponent: `1e999999999` costs nothing.

Where this reading differs from the apiserver's, on purpose: text longer than 4000
characters is refused (Python's int() refuses more digits; no request has them); an integer
beyond int64 is read as its digits (kubectl sends a YAML one so, a JSON one as a float64).
Go's int32 exponents wrap, and so do these (`1e4294967296` is 1).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import NamedTuple

from .quantity import QuantityError
from .text import shorten

_BINARY_SI, _DECIMAL_SI, _DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"
# suffix.go, `newSuffixer`: suffix -> (base, exponent, format).
_DECIMAL_SUFFIXES = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}
_BINARY_SUFFIXES = {1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}  # powers of 1024
_SUFFIXES = {
    **{s: (10, e, _DECIMAL_SI) for e, s in _DECIMAL_SUFFIXES.items()},
    **{s: (2, 10 * p, _BINARY_SI) for p, s in _BINARY_SUFFIXES.items()},
}
_SUFFIX_CHARS = "eEinumkKMGTP"  # parseQuantityString's suffix scan, sign and digits after it
_DIGITS = "0123456789"
_SIGNED_DIGITS = re.compile(r"[+-]?0*([0-9]+)")
_INT64 = 1 << 63
# The white space `strings.TrimSpace` removes that Go's JSON encoder (kubectl's) writes as
# itself: tab, newline and the line separators reach UnmarshalJSON escaped (`\n`), untrimmed.
_TRIMMED = " \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
_TRIMMED += "\u202f\u205f\u3000"
_MAX_TEXT = 4000


class _Quantity(NamedTuple):
    """A parsed `Quantity`: its value, its `Format` and the text `String` returns as is."""

    unscaled: int
    scale: int
    format: str
    text: str | None


def _int32(number: int) -> int:
    """`int32(number)`: Go's conversion wraps around."""
    return (number + (1 << 31)) % (1 << 32) - (1 << 31)


def _round_up(unscaled: int, shift: int) -> int:
    """`unscaled / 10^shift` rounded away from zero (`inf.RoundUp`, `negativeScaleInt64`)."""
    if unscaled == 0:
        return 0
    digits = len(str(abs(unscaled)))
    # Fewer digits than the shift: the quotient is a fraction, one unit once rounded up.
    whole, rest = divmod(abs(unscaled), 10**shift) if shift <= digits else (0, 1)
    return (whole + (rest != 0)) * (1 if unscaled > 0 else -1)


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """`parseQuantityString`: (positive, the number as written, the digits before the point
    with leading zeros stripped, the digits after it, the suffix)."""
    end = len(text)
    positive = not text.startswith("-")
    pos = 1 if text[0] in "+-" else 0
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        start = pos = pos + 1
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    value, start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(f"{shorten(text)!r} is not a Kubernetes quantity")
    return positive, value, num, denom, text[start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """`suffixer.interpret`: (base, exponent, format) of a suffix."""
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    # strconv.ParseInt(suffix[1:], 10, 64), then int32(): an exponent wraps, never fails.
    match = _SIGNED_DIGITS.fullmatch(suffix[1:]) if suffix[:1] in ("e", "E") else None
    if match is None or len(match[1]) > 19 or not -_INT64 <= int(suffix[1:]) < _INT64:
        raise QuantityError(f"{suffix!r} is no quantity suffix")
    return 10, _int32(int(suffix[1:])), _DECIMAL_EXPONENT


def _parse_go(text: str) -> _Quantity:
    """`ParseQuantity`: the value, its format and, where Go keeps it, the text."""
    if text == "0":
        return _Quantity(0, 0, _DECIMAL_SI, text)
    if not text or len(text) > _MAX_TEXT:
        raise QuantityError(f"{shorten(text)!r} is not a Kubernetes quantity")
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, form = _interpret(suffix)
    # The int64 fast path, which keeps the text when it is already canonical.
    if form == _BINARY_SI:
        # 1Mi (2^20) has ~6 digits of decimal precision: exponent*3/10 of them.
        fast = not denom and len(num) + exponent * 3 // 10 + 1 <= 15
        scale = 0
    else:
        fast = len(num) + len(denom) <= 18
        scale = _int32(exponent - len(denom))
    if fast and scale >= -9:
        digits = num + denom
        number = int(digits) << (exponent if base == 2 else 0)  # both fit an int64 here
        if form == _BINARY_SI:
            kept = int(digits) & 0x07 != 0
        else:
            kept = scale % 3 == 0 and not digits.endswith("000") and digits[0] != "0"
        return _Quantity(number if positive else -number, scale, form, text if kept else None)
    # The inf.Dec path: exact, then rounded up to nano and, for BinarySI, capped at int64.
    if not any(c in _DIGITS for c in value):  # inf.Dec.SetString needs a digit (".e-10")
        raise QuantityError(f"{shorten(text)!r} is not a Kubernetes quantity")
    unscaled, scale = int(num + denom), -len(denom)
    if base == 2:
        unscaled <<= exponent
    else:
        scale = -_int32(len(denom) + _int32(-exponent))
    if scale < -9:
        unscaled, scale = _round_up(unscaled, -9 - scale), -9
    if form == _BINARY_SI and unscaled > (_INT64 - 1) * 10**-scale:
        unscaled, scale = _INT64 - 1, 0
    if form == _BINARY_SI and 0 < unscaled < 10**-scale:
        form = _DECIMAL_SI
    return _Quantity(unscaled if positive else -unscaled, scale, form, None)


def _render(quantity: _Quantity) -> str:
    """`Quantity.String`: the kept text, else `CanonicalizeBytes`."""
    unscaled, scale, form, text = quantity
    if text is not None:
        return text
    if unscaled == 0:
        return "0"
    sign = "-" if unscaled < 0 else ""
    if form == _BINARY_SI:
        whole = unscaled * 10**scale if scale >= 0 else _round_up(unscaled, -scale)
        # Between -1024 and 1024, or not whole: DecimalSI, "to avoid rounding and confusion".
        if abs(unscaled) < 1024 * 10 ** max(-scale, 0) or whole * 10 ** max(-scale, 0) != unscaled:
            form = _DECIMAL_SI
        else:
            number, times = abs(whole), 0
            while number % 1024 == 0:
                number, times = number // 1024, times + 1
            return f"{sign}{number}{_BINARY_SUFFIXES.get(times, '')}"
    digits = str(abs(unscaled))
    mantissa = digits.rstrip("0")
    # The exponent, as large as possible, a multiple of three (`AsCanonicalBytes`), in int32.
    exponent = _int32(scale + len(digits) - len(mantissa))
    mantissa += "0" * (exponent % 3)
    exponent = _int32(exponent - exponent % 3)
    if form == _DECIMAL_SI:
        # Go writes no suffix where it has none (above E): 1000E is printed "1".
        return sign + mantissa + _DECIMAL_SUFFIXES.get(exponent, "")
    return sign + mantissa + (f"e{exponent}" if exponent else "")


def _json_text(value: object) -> str:
    """The text kubectl sends for a YAML or JSON value: a string's own, an integer's digits,
    a float as Go's `encoding/json` writes a float64 (shortest, an exponent outside
    [1e-6, 1e21)); `null` decodes to zero."""
    if value is None:
        return "0"
    if isinstance(value, str):
        return value.strip(_TRIMMED)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, float) or not math.isfinite(value):
        raise QuantityError(f"{shorten(value)} is not a quantity")
    number = Decimal(repr(abs(value))).normalize()
    if value == 0 or 1e-6 <= abs(value) < 1e21:
        text = f"{number:f}"
    else:
        _, digits, exponent = number.as_tuple()
        mantissa = "".join(map(str, digits))
        power = int(exponent) + len(mantissa) - 1
        text = mantissa[0] + ("." + mantissa[1:] if len(mantissa) > 1 else "") + f"e{power:+d}"
    return ("-" if math.copysign(1, value) < 0 else "") + text


def canonical(value: object, *, round_up_to_milli: bool = False) -> str:
    """The quantity as the apiserver stores it and hands it to admission: `3000` -> `3k`,
    `2048Mi` -> `2Gi`, `1.5Gi` -> `1536Mi`, `0.5` -> `500m`; raise `QuantityError` where the
    apiserver refuses the value.

    `round_up_to_milli` is `SetDefaults_ResourceList` (pkg/apis/core/v1/defaults.go), which
    the apiserver applies to every resource list: `RoundUp(-3)`, so `0.0001` is stored `1m`.
    """
    parsed = _parse_go(_json_text(value))
    if round_up_to_milli and parsed.scale < -3:
        parsed = _Quantity(_round_up(parsed.unscaled, -3 - parsed.scale), -3, parsed.format, None)
    return _render(parsed)
