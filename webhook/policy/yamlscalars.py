"""Plain YAML scalars typed as kubectl types them, not as PyYAML does.

kubectl turns YAML into JSON with sigs.k8s.io/yaml, which types a plain (unquoted) scalar by
go-yaml v2's rules (go.yaml.in/yaml/v2, resolve.go, `resolve`); PyYAML follows YAML 1.1's
resolvers (yaml/resolver.py). They part on, for instance, `1e3` (Go: the number 1000;
PyYAML: a string), `0o17` (Go: 15), `08` (Go: 8), `y`/`n` (Go: booleans), `1:20` (PyYAML: the
base-60 integer 80) and `2024-01-02` (PyYAML: a date; what kubectl sends is the string). A
manifest `review` reads must mean to it what it means to the cluster, so `_Loader` in
yamldocs.py resolves plain scalars here. Verified against the real kubectl v1.37.2
(`kubectl create --dry-run=client -o json`; tests/offline/test_yaml_output.py).

A number value goes on as kubectl sends it, JSON, which the apiserver decodes as an integer
wherever it can (k8s.io/apimachinery, pkg/util/json/json.go, `convertNumber`): `1e3` and `5.`
are integers here too (`plain_value`). A key becomes the text sigs.k8s.io/yaml writes for it
(yaml.go, `convertToJSONableObject`; `json_key`): `n:` is the key "false", `1E10:` "1e+10".
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

INT, FLOAT, BOOL, NULL, STR, MERGE = (
    f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null", "str", "merge")
)
_NULLS = {"", "~", "null", "Null", "NULL"}
_TRUE = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FALSE = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
_SPECIAL_FLOATS = {
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
}
# go-yaml v2's `yamlStyleFloat`, matched after underscores are removed.
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
# strconv.ParseInt with base 0: a prefix says the base, a leading 0 alone is octal.
_BASES = {"0x": (16, "0-9a-fA-F"), "0o": (8, "0-7"), "0b": (2, "01")}


def _integer(plain: str) -> int | None:
    """`plain` (underscores removed) as strconv.ParseInt(plain, 0, 64) reads it, or else as
    ParseUint (unsigned, up to 2^64 - 1); None where neither does."""
    sign, digits = (plain[0], plain[1:]) if plain[:1] in ("+", "-") else ("", plain)
    base, allowed = _BASES.get(digits[:2].lower(), (0, ""))
    if base:
        digits = digits[2:]
    elif len(digits) > 1 and digits.startswith("0"):
        base, allowed = 8, "0-7"
    else:
        base, allowed = 10, "0-9"
    if not re.fullmatch(f"[{allowed}]+", digits):
        return None
    value = int(digits, base) * (-1 if sign == "-" else 1)
    if -(2**63) <= value < 2**63 or (not sign and value < 2**64):
        return value
    return None


def _number(plain: str) -> tuple[str, Any] | None:
    integer = _integer(plain)
    if integer is not None:
        return INT, integer
    if _FLOAT.match(plain):
        value = float(plain)
        if math.isinf(value):  # ParseFloat's range error: go-yaml keeps the string
            return None
        return FLOAT, value
    return None


def typed(value: str) -> tuple[str, Any]:
    """The tag and value kubectl gives the plain scalar `value`."""
    if value in _NULLS:
        return NULL, None
    if value in _TRUE or value in _FALSE:
        return BOOL, value in _TRUE
    if value in _SPECIAL_FLOATS:
        return FLOAT, _SPECIAL_FLOATS[value]
    if value == "<<":
        return MERGE, value
    if value[0] in "-+.0123456789":
        number = _number(value.replace("_", ""))
        if number is not None:
            return number
    return STR, value


def plain_value(text: str) -> Any:
    """The value of the plain scalar `text` once kubectl sent it as JSON."""
    found = typed(text)[1]
    if isinstance(found, float) and found.is_integer() and -(2**63) <= found < 2**63:
        return int(found)
    return found


def json_key(key: Any) -> Any:
    """A mapping key as sigs.k8s.io/yaml writes it into JSON: a bool as `true`/`false`, an
    integer in decimal, a float as strconv.FormatFloat(key, 'g', -1, 32), whose infinities
    (beyond float32 too) and NaN are written `.inf`, `-.inf`, `.nan` (None: no key JSON can
    hold; kubectl refuses it)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return _float32_g(key)
    return key


def _float32_g(number: float) -> str:
    """strconv.FormatFloat(number, 'g', -1, 32): the shortest digits that read back as the
    same float32, in exponent form where the exponent is under -4 or 6 and over."""
    # sigs.k8s.io/yaml writes Go's infinities and NaN in YAML's words.
    if math.isnan(number):
        return ".nan"
    try:
        single = struct.pack(">f", number)
    except OverflowError:  # beyond float32: Go's float32(number) is an infinity
        number = math.copysign(math.inf, number)
        single = struct.pack(">f", number)
    if math.isinf(number):
        return ".inf" if number > 0 else "-.inf"
    for places in range(9):
        written = f"{struct.unpack('>f', single)[0]:.{places}e}"
        if struct.pack(">f", float(written)) == single:
            break
    mantissa, _, exponent = written.partition("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    power = int(exponent)
    if power < -4 or power >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'+' if power >= 0 else '-'}{abs(power):02d}"
    point = power + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"
