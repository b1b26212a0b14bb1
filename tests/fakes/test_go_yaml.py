"""The go-yaml double types plain scalars as go-yaml v2's resolve.go does (see its docstring)."""

import pytest

from tests.fakes.go_yaml import GoTyped, load_all


@pytest.mark.parametrize(
    ("scalar", "tag"),
    [
        ("1e5", "float"),
        ("1e-4", "float"),
        ("3E+2", "float"),
        (".5", "float"),
        ("5.", "float"),
        ("-.Inf", "float"),
        (".NaN", "float"),
        ("+infinity", "float"),
        ("0x1p-2", "float"),
        ("42", "int"),
        ("-7", "int"),
        ("0o17", "int"),
        ("0b101", "int"),
        ("0x1F", "int"),
        ("1_000", "int"),
        ("y", "bool"),
        ("Off", "bool"),
        ("TRUE", "bool"),
        ("~", "null"),
        ("Null", "null"),
        ("2024-01-02", "timestamp"),
        ("2024-1-2T10:00:00Z", "timestamp"),
    ],
)
def test_typed_scalars(scalar, tag):
    assert load_all(f"v: {scalar}\n") == [{"v": GoTyped(tag, scalar)}]


@pytest.mark.parametrize(
    "scalar",
    ["hello", "1.2.3", "1:20", "-f", "yess", "nvidia.com/gpu", "2048MiB", "'1e5'", '"y"', "inf"],
)
def test_strings(scalar):
    expected = scalar.strip("'\"")
    assert load_all(f"v: {scalar}\n") == [{"v": expected}]
