"""`review -o yaml` reads back under Go's YAML rules exactly as it was written.

kubectl decodes YAML with go-yaml v2 (`tests/fakes/go_yaml.py` imitates its typing), so a
string that Go would read as a number, boolean, null or timestamp must be quoted, or
`review -o yaml | kubectl apply -f -` changes env values and ConfigMap data.
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.go_yaml import GoTyped, load_all
from tests.support.builders import container, pod
from tests.support.cli import run_cli
from webhook.offline.yaml_output import dump_all

# Scalars every YAML reader disagrees on, then generated ones of the same shapes.
TRICKY = [
    "1e-4",
    "1e5",
    "3e-5",
    "1E10",
    ".5",
    "5.",
    "0x1p3",
    "0o17",
    "0b1",
    "1_000",
    "017",
    "y",
    "n",
    "Y",
    "on",
    "Off",
    "NO",
    "true",
    "~",
    "null",
    "",
    ".inf",
    "-.Inf",
    ".NaN",
    "+inf",
    "-nan",
    "2024-01-02",
    "2024-01-02T10:00:00Z",
    "1:20",
    "-f",
    "<<",
    "12:30:45",
    "1.2.3",
    "v1",
    "0",
    "-0",
    "+1",
    "0.0.0.0",
    "nvidia.com/gpu",
    "#x",
    "a: b",
    "- x",
]
NUMBERS = st.from_regex(
    r"\A[-+]?([0-9_]{1,4}(\.[0-9_]{0,3})?|\.[0-9]{1,3})([eE][-+]?[0-9]{1,2})?\Z"
)
SCALARS = st.one_of(st.sampled_from(TRICKY), NUMBERS, st.text(max_size=12))
VALUES = st.recursive(
    SCALARS | st.integers() | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SCALARS, inner, max_size=3),
    max_leaves=12,
)


def as_go(value: object) -> object:
    """`value` as the double loads it: strings as they are, other scalars as Go-typed."""
    if isinstance(value, dict):
        return {as_go(k): as_go(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_go(v) for v in value]
    if value is None:
        return GoTyped("null", "null")
    if isinstance(value, bool):
        return GoTyped("bool", str(value).lower())
    if isinstance(value, int):
        return GoTyped("int", str(value))
    return value


@settings(max_examples=400, deadline=None)
@given(data=st.dictionaries(SCALARS, VALUES, max_size=6))
def test_every_document_reads_back_the_same_in_go(data):
    assert load_all(dump_all([data])) == [as_go(data)]


def test_review_yaml_keeps_env_strings_strings(tmp_path):
    """The CLI's own output: env values and annotations survive `kubectl apply` unchanged."""
    env = [{"name": f"V{i}", "value": value} for i, value in enumerate(TRICKY)]
    manifest = pod(
        container(limits={"aliyun.com/gpu-mem": 2}, env=env),
        annotations={"note": "1e5", "y": "y"},
    )
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(manifest))
    code, out, _ = run_cli("review", str(path), "-o", "yaml")
    assert code == 0
    [rewritten] = load_all(out)
    assert rewritten["spec"]["containers"][0]["env"] == env
    assert rewritten["metadata"]["annotations"]["note"] == "1e5"
    assert rewritten["metadata"]["annotations"]["y"] == "y"
