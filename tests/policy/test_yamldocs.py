"""YAML errors name the file and line, with a hint for a tab or an unrendered template; a
repeated key is an error naming both lines; hostile nesting is an error, not a crash."""

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
        (
            "policies:\n\t- name: a\n",
            "f.yaml: line 2: not valid YAML: found character '\\t' that cannot start any token;"
            " indent with spaces, not tabs",
        ),
        (
            "spec:\n  image: {{ .Values.image }}\n",
            "f.yaml: line 2: not valid YAML: found unhashable key; {{ .Values.image }} looks like"
            " an unrendered Helm template: render it first"
            " (`helm template RELEASE CHART | lwgpu review -`)",
        ),
        (
            "profiles:\n- a\nname: x\nprofiles:\n- b\n",
            "f.yaml: line 4: key 'profiles' repeats line 1: kubectl would keep the last one"
            " without a word; keep one of them",
        ),
        (
            "limits:\n  aliyun.com/gpu-mem: 2\n  'aliyun.com/gpu-mem': 4\n",
            "f.yaml: line 3: key 'aliyun.com/gpu-mem' repeats line 2",
        ),
    ],
)
def test_errors_name_where(text, message):
    with pytest.raises(YamlError) as err:
        load_all(text, "f.yaml")
    assert str(err.value).startswith(message)


def test_a_key_beside_a_merge_overrides_it():
    """YAML's merge key: `b` written beside `<<` is no repetition of the merged `b`."""
    text = "x: &a {b: 1}\nz:\n  <<: *a\n  b: 2\n"
    assert load_all(text, "f.yaml") == [{"x": {"b": 1}, "z": {"b": 2}}]


def test_documents():
    assert load_all("a: 1\n---\n---\nb: 2\n", "f.yaml") == [{"a": 1}, None, {"b": 2}]
