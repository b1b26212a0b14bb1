"""YAML errors name the file and line, and hostile nesting is an error, not a crash."""

import pytest

from webhook.policy.yamldocs import YamlError, load_all


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: [1,\nb: 2\n", "f.yaml: line 3: not valid YAML: expected ',' or ']'"),
        (
            "ok: 1\nbad: \x07\n",
            "f.yaml: line 2: not valid YAML: special characters are not allowed",
        ),
        ("[" * 5000 + "]" * 5000, "f.yaml: not valid YAML: nested too deeply"),
    ],
)
def test_errors_name_where(text, message):
    with pytest.raises(YamlError) as err:
        load_all(text, "f.yaml")
    assert str(err.value).startswith(message)


def test_documents():
    assert load_all("a: 1\n---\n---\nb: 2\n", "f.yaml") == [{"a": 1}, None, {"b": 2}]
