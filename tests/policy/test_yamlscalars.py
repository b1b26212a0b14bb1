"""Plain scalars typed as the real kubectl v1.37.2 types them (`kubectl create
--dry-run=client -o json` of the same text printed these; tests/offline/test_yaml_output.py
compares with the real kubectl on every run), where PyYAML's YAML 1.1 reading differs."""

import pytest

from webhook.policy.yamldocs import load_all

# text -> (PyYAML's reading, kubectl's)
READINGS = {
    "2024-01-02": ("a date", "2024-01-02"),
    "y": ("y", True),
    "n": ("n", False),
    "0o17": ("0o17", 15),
    "08": ("08", 8),
    "017": (15, 15),
    "1e3": ("1e3", 1000),
    "1.0e3": ("1.0e3", 1000),
    "1:20": (80, "1:20"),
    "12:30:45": (45045, "12:30:45"),
    "1_0.5": (10.5, 10.5),
    "0x_1F": (31, 31),
    "1e400": (float("inf"), "1e400"),
    "99999999999999999999": (99999999999999999999, 1e20),
    "5.": (5.0, 5),
    "0x1p3": ("0x1p3", "0x1p3"),
    "-0": (0, 0),
}


@pytest.mark.parametrize("text", READINGS)
def test_a_plain_value_reads_as_kubectl_reads_it(text):
    [read] = load_all(f"v: {text}\n", "f.yaml")
    assert read["v"] == READINGS[text][1]
    assert type(read["v"]) is type(READINGS[text][1])


@pytest.mark.parametrize(
    "text, key",
    [
        ("n", "false"),
        ("Y", "true"),
        ("1E10", "1e+10"),
        ("1e3", "1000"),
        (".5", "0.5"),
        ("7", "7"),
        ("1e300", ".inf"),  # beyond float32: an infinity, in YAML's word
        ("-1e300", "-.inf"),
        ("3.4e38", "3.4e+38"),
    ],
)
def test_a_plain_key_is_the_text_kubectl_writes_into_json(text, key):
    assert load_all(f"{text}: x\n", "f.yaml") == [{key: "x"}]
