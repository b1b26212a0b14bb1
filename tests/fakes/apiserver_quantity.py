"""Resource quantities as the apiserver reads them; a test double of apimachinery's `Quantity`.

`k8s.io/apimachinery/pkg/api/resource/quantity.go`, `ParseQuantity`: an optional sign, digits
with an optional fraction, then a binary suffix (`Ki` ... `Ei`), a decimal one (`n u m k M G T P
E` or none) or an exponent (`e3`, `E-2`); a JSON number is read from its text the same way
(`Quantity.UnmarshalJSON`). Values are exact fractions, as `inf.Dec` keeps them, so comparing
`1Gi` with `1024Mi` is `Cmp`'s answer. Written apart from the product's `webhook.api.quantity`,
which the double checks.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?|[eE][+-]?[0-9]+)"
)


class QuantityError(ValueError):
    """Not a quantity: `quantities must match the regular expression ...`."""


def parse(value: object) -> Fraction:
    """The exact value of a quantity written as a string or a JSON number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _QUANTITY.fullmatch(str(value))
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity")
    number, suffix = Fraction(match["number"]), match["suffix"]
    if suffix in _BINARY:
        return number * 1024 ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def text(value: object) -> str:
    """The quantity as messages show it (its own spelling; `Quantity.String` canonicalises)."""
    return str(value)
