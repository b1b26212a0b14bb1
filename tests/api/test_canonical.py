"""Quantities spelled as the apiserver stores them (`webhook.api.canonical`).

The cases are Kubernetes' own, from k8s.io/apimachinery/pkg/api/resource/quantity_test.go:
`TestQuantityParseEmit` and `TestParseQuantity` give input and `String()`; `TestQuantityString`
gives each canonical spelling and an alternate that parses to it; `TestQuantityParse` gives
values and formats (spelled here by `CanonicalizeBytes`) and the strings it refuses;
`TestJSONWhitespace` the white space `UnmarshalJSON` trims. The rest come from the sources
named per case and were checked against apimachinery v0.34's `json.Unmarshal` into a
`resource.Quantity` followed by `json.Marshal`.
"""

import pytest

from webhook.api.canonical import canonical
from webhook.api.quantity import QuantityError

# TestQuantityParseEmit.
PARSE_EMIT = [
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
]

# TestQuantityString: (canonical, alternate); the canonical text parses to itself.
STRING = [
    ("1Gi", "1024Mi"),
    ("300Mi", "307200Ki"),
    ("6Ki", None),
    ("1001Gi", "1025024Mi"),
    ("1Ti", "1024Gi"),
    ("5", "5000m"),
    ("500m", "0.5"),
    ("1G", "1000M"),
    ("1G", "0.001T"),
    ("1m", "1000u"),
    ("80m", None),
    ("1080m", "1.08"),
    ("1080m", "1080000000n"),
    ("300M", None),
    ("1T", None),
    ("1234567M", None),
    ("1234567m", None),
    ("3k", None),
    ("1025", None),
    ("0", "00"),
    ("1e9", ".001e12"),
    ("1e-3", "0.001e0"),
    ("1e-9", "1000e-12"),
    ("80e-3", None),
    ("300e6", None),
    ("1e12", None),
    ("1e3", None),
    ("3e3", None),
    ("1n", None),
    ("80n", None),
    ("1080n", None),
    ("1u", None),
    ("80u", None),
    ("1080u", None),
]

# TestParseQuantity: (input, String()), the input itself where the test names no canonical.
PARSE_QUANTITY = [
    ("-999999999999999999", "-999999999999999999"),
    ("999999999999999999.0", "999999999999999999"),
    ("-999999999999999999.1", "-999999999999999999100m"),
    ("9999999999999999999", "9999999999999999999"),
    ("-1E", "-1E"),
    ("1000000000000000000", "1E"),
    ("1.0E", "1E"),
    ("-1000000000000000000.0", "-1E"),
    ("9999999999999999999000m", "9999999999999999999"),
    ("1.0000000000000000001E", "1000000000000000000100m"),
    ("-1.000000000000000001E", "-1000000000000000001"),
    ("10E", "10E"),
    ("10000000000000000000000m", "10E"),
    ("10.0000000000000000001E", "10000000000000000000100m"),
    ("-9223372036854775809", "-9223372036854775809"),
    ("9223372036854775806000m", "9223372036854775806"),
    ("9223372036854775807.1", "9223372036854775807100m"),
    ("9223372036854775808", "9223372036854775808"),
]

# TestQuantityParse: (input, value and Format it names, spelled by CanonicalizeBytes).
PARSE = [
    ("0n", "0"),
    ("0Ki", "0"),
    ("50k", "50k"),
    ("40T", "40T"),
    ("1E-3", "1E-3"),  # kept: scale a multiple of 3, no trailing 000
    ("1e14", "100e12"),
    ("100.035k", "100.035k"),
    ("0.0005k", "500m"),
    ("0.00500", "5m"),
    ("0.5e-1", "50e-3"),
    ("10.035M", "10.035M"),
    ("1.3E+6", "1300e3"),
    ("1.40e9", "1400e6"),
    ("7.123456M", "7.123456M"),
    ("1.01E", "1010P"),
    ("3.001n", "4n"),  # rounded up to nano
    ("1.1E-9", "2e-9"),
    ("0.00000012345", "124n"),
    ("9Ei", "9223372036854775807"),  # BinarySI is capped at int64
    ("9223372036854775807Ki", "9223372036854775807"),
    ("12E", "12E"),
    ("100.035Ki", "102435840m"),  # BinarySI that is not whole: DecimalSI
    ("0.5Mi", "512Ki"),
    ("0.025Ti", "27487790694400m"),
    ("0.000000000001Ki", "2n"),  # rounds up, changes format
    (".001", "1m"),
    (".0001k", "100m"),
    ("1.G", "1.G"),  # the fast path keeps a canonical-looking text as written
]

# TestQuantityParse's invalid strings, and "" (its first check).
INVALID = ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-"]


@pytest.mark.parametrize(("written", "stored"), PARSE_EMIT + PARSE_QUANTITY + PARSE)
def test_canonical_spelling(written, stored):
    """Each input is stored as apimachinery's `String()` writes it."""
    assert canonical(written) == stored


@pytest.mark.parametrize(("written", "stored"), PARSE_EMIT)
def test_negative_spelling(written, stored):
    """TestQuantityParseEmit's negative cases: the same with a minus sign."""
    assert canonical("-" + written) == "-" + stored


@pytest.mark.parametrize(("stored", "alternate"), STRING)
def test_canonical_text_is_kept_and_alternates_reach_it(stored, alternate):
    """A canonical text is stored as written; its alternate spelling is stored as it."""
    assert canonical(stored) == stored
    if alternate is not None:
        assert canonical(alternate) == stored


@pytest.mark.parametrize("written", INVALID)
def test_refused(written):
    with pytest.raises(QuantityError):
        canonical(written)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        # The cases: HAMI's MiB count, a binary size, fractions, plain numbers.
        (3000, "3k"),
        ("3000", "3k"),
        ("2048Mi", "2Gi"),
        ("1.5Gi", "1536Mi"),
        (0.5, "500m"),
        ("1000m", "1"),
        ("100M", "100M"),
        (2, "2"),
        # A float is sent as Go's encoding/json writes a float64: 1000.0 as 1000.
        (1000.0, "1k"),
        (1.5, "1500m"),
        (1e21, "1e+21"),  # 'e' format from 1e21 up; ParseQuantity keeps that text
        (1.5e-7, "150e-9"),
        (-0.0, "0"),
        # A string exponent keeps its DecimalExponent format (TestQuantityString).
        ("1e3", "1e3"),
        # Text already canonical is kept as written, sign and leading zeros included.
        ("+5", "+5"),
        ("+1Ki", "+1Ki"),
        ("01Ki", "01Ki"),
        ("1.500", "1.500"),
        # suffix.go has no DecimalSI suffix above E: Go writes the mantissa alone.
        ("1000E", "1"),
        # int32(exponent) wraps.
        ("1e4294967296", "1e4294967296"),
        ("2000e2147483647", "2e-2147483646"),
        # An exponent costs nothing: no power of ten is built from it.
        ("1e999999999", "1e999999999"),
        ("1e-999999999", "1e-9"),
        # TestJSONWhitespace; white space Go's JSON encoder writes as itself is trimmed too.
        (" 1", "1"),
        ("1 ", "1"),
        (-1, "-1"),
        ("\u00a02\u3000", "2"),
        # Quantity.UnmarshalJSON reads null as zero.
        (None, "0"),
    ],
)
def test_values_as_kubectl_sends_them(value, stored):
    """YAML and JSON values as kubectl sends them to the apiserver, and what it stores."""
    assert canonical(value) == stored


@pytest.mark.parametrize("value", [True, [1], {"a": 1}, float("inf"), "\t1", "1\n", "x" * 5000])
def test_refused_values(value):
    """No quantity: booleans, lists, maps, infinities; tab and newline reach UnmarshalJSON
    escaped by Go's JSON encoder, so they are not trimmed; an absurdly long text."""
    with pytest.raises(QuantityError):
        canonical(value)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("0.0001", "1m"),
        ("100u", "1m"),
        ("1n", "1m"),
        ("-0.0001", "-1m"),
        ("1.000500", "1001m"),
        (1.5e-7, "1e-3"),
        ("3.001n", "1m"),
        ("1080m", "1080m"),
        ("1.500", "1.500"),  # milli-scale already: RoundUp keeps the text
        ("1.5Ki", "1536"),
        ("3k", "3k"),
    ],
)
def test_resource_lists_round_up_to_milli(value, stored):
    """`SetDefaults_ResourceList` (pkg/apis/core/v1/defaults.go): `RoundUp(-3)` of each value."""
    assert canonical(value, round_up_to_milli=True) == stored
