"""Kubernetes' validation rules as `webhook.api.validation` implements them, case by case.

Expectations follow `k8s.io/apimachinery/pkg/util/validation` (IsQualifiedName,
IsValidLabelValue) and `pkg/apis/core/validation/validation.go` (ValidateTolerations).
"""

import pytest

from webhook.api.validation import (
    is_label_value,
    is_qualified_name,
    label_value_error,
    toleration_errors,
)


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("gpu", True),
        ("aliyun.accelerator/nvidia_mem", True),
        ("example.com/a_b.c-d", True),
        ("a" * 63, True),
        ("a" * 64, False),  # the name part is at most 63 characters
        ("x" * 253 + "/a", True),
        ("x" * 254 + "/a", False),  # the prefix is at most 253
        ("/a", False),  # an empty prefix
        ("Example.com/a", False),  # the prefix is lower case
        ("a/b/c", False),
        ("-a", False),
        ("a b", False),
        ("", False),
        (5, False),
    ],
)
def test_qualified_names(key, valid):
    assert is_qualified_name(key) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("", True),
        ("2048MiB", True),
        ("GRID-P4-2Q", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("2048 MiB", False),
        ("-x", False),
        (2048, False),
        (None, False),
    ],
)
def test_label_values(value, valid):
    assert is_label_value(value) is valid
    # A message exactly when the value is refused.
    assert (label_value_error(value) is None) is valid


@pytest.mark.parametrize(
    ("value", "space", "message"),
    [
        (
            "2048 MiB",
            "",
            "'2048 MiB' is not a label value: it contains a space (allowed: letters, digits, "
            "'-', '_', '.'); write '2048MiB'",
        ),
        ("GRID P4\t2Q", "-", "it contains a tab and a space (allowed: letters, digits"),
        ("GRID P4\t2Q", "-", "write 'GRID-P4-2Q'"),
        ("a:b c", "", "it contains a space and ':' (allowed"),  # no suggestion: ':' stays
        ("a!b@c#d$e%f", "", "it contains '!', '#', '$', '%' and others"),
        ("a" * 64, "", "it is 64 characters long (at most 63)"),
        ("-x", "", "it starts with '-' (it must start and end with a letter or digit)"),
        ("x.", "", "it ends with '.'"),
        (2048, "", "2048 is not a label value: it is a number, not a string; quote it: '2048'"),
        (True, "", "true is not a label value: it is a boolean, not a string; quote it: 'true'"),
        ([1], "", "[1] is not a label value: it is a list, not a string"),
        ({"a": 1}, "", "it is a mapping, not a string"),
        (None, "", "null (empty) is not a label value: write a value, or '' for an empty one"),
    ],
)
def test_label_value_errors_say_what_is_wrong(value, space, message):
    error = label_value_error(value, space=space)
    assert error is not None and message in error
    if isinstance(value, str) and ":" in value:
        assert "write" not in error


@pytest.mark.parametrize(
    ("toleration", "fields"),
    [
        ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, []),
        (
            {
                "key": "gpu",
                "operator": "Equal",
                "value": "true",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            [],
        ),
        ({"key": "gpu", "value": "x"}, []),  # an empty operator means Equal
        ({"operator": "Exists"}, []),  # an empty key with Exists tolerates every taint
        ({"key": "gpu", "operator": "Exists", "value": "x"}, ["value"]),
        ({"key": "gpu", "operator": "exists"}, ["operator"]),
        ({"operator": "Equal"}, ["operator"]),
        ({"key": "gpu", "operator": "Exists", "tolerationSeconds": 5}, ["effect"]),
        (
            {"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": True},
            ["tolerationSeconds"],
        ),
        ({"key": "gpu", "effect": "Never"}, ["effect"]),
        ({"key": "a b", "operator": "Exists"}, ["key"]),
        ({"key": "gpu", "value": "a b"}, ["value"]),
        ({"key": 1}, ["key"]),
        ({"key": "gpu", "colour": "red"}, ["colour"]),
        (["gpu"], [""]),
    ],
)
def test_tolerations(toleration, fields):
    assert [field for field, _ in toleration_errors(toleration)] == fields
