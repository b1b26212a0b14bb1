"""The policy loader against random text, corrupted YAML and mutated valid policies.

`load_documents` must report every problem through its `errors` list (which `load_policies`
raises as `PolicyError`) and never raise; every message names the file and either a
document and a field (`fuzz.yaml#1: spec.profiles[0].memory: ...`) or a line
(`fuzz.yaml: line 4: not valid YAML: ...`). The shipped and example policies are the seeds.
The examples are derandomized so that CI runs the same texts every time.

Two inputs PyYAML handles badly (nesting deeper than Python's recursion limit; characters
the YAML reader refuses, which carry no line mark) have their own tests at the end.
"""

from __future__ import annotations

import collections
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.mutate import FUZZ, SMALL_VALUES, corrupted, mutated, print_counts
from tests.support.paths import EXAMPLE_POLICIES, SHIPPED_POLICY
from tests.support.policies import TAINTED_POLICY_YAML
from webhook.policy import Policy, load_documents

WHERE = "fuzz.yaml"
# `file#doc: field: message` or `file: line N: message`; a field path may hold any key.
MESSAGE = re.compile(
    rf"{re.escape(WHERE)}(?:#(?P<doc>\d+): (?P<field>.+?): |: line \d+: ).+", re.DOTALL
)
# What yaml.reader refuses (its NON_PRINTABLE class): such text hits the ReaderError bug below.
REFUSED = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# libyaml where PyYAML was built with it: the test's own parsing and dumping, not the loader's.
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
FAST_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SEED_TEXTS = [
    SHIPPED_POLICY.read_text(),
    *(p.read_text() for p in sorted(EXAMPLE_POLICIES.glob("*.yaml"))),
    TAINTED_POLICY_YAML,
]
SEED_DOCUMENTS = [d for text in SEED_TEXTS for d in yaml.safe_load_all(text) if d]


def readable(text: str) -> str:
    """`text` without the characters that trigger the pinned ReaderError bug."""
    return REFUSED.sub("?", text)


def check_load(text: str) -> str:
    """Load `text`; assert the loader's contract. Returns what happened, for the counts."""
    errors: list[str] = []
    policies = load_documents(text, WHERE, errors)
    assert all(isinstance(p, Policy) and p.profiles for p in policies)
    matches = [MESSAGE.fullmatch(message) for message in errors]
    assert all(matches), f"an error names no document/field or line: {errors}"[:2000]
    named = [int(m["doc"]) for m in matches if m["doc"] is not None]
    if named:
        # Composed, not constructed: PyYAML's own constructors refuse scalars kubectl reads
        # as strings (a lone `=` is YAML 1.1's value tag), which the loader reads as kubectl.
        assert max(named) < len(list(yaml.compose_all(text, Loader=FAST_LOADER)))
    if not errors:
        return "valid" if policies else "no-documents"
    return "bad-yaml" if " not valid YAML: " in errors[0] else "bad-policy"


def _documents_text(documents: list) -> str:
    # Document separators included, so that errors must name the right index.
    return "".join(
        "---\n" + yaml.dump(d, Dumper=FAST_DUMPER, allow_unicode=True) for d in documents
    )


DOCUMENTS = st.lists(mutated(SEED_DOCUMENTS, values=SMALL_VALUES), min_size=1, max_size=3)
TEXTS = st.one_of(
    DOCUMENTS.map(_documents_text),
    DOCUMENTS.map(_documents_text),
    st.sampled_from([t.encode() for t in SEED_TEXTS])
    .flatmap(corrupted)
    .map(lambda b: b.decode("utf-8", "replace")),
    st.text(max_size=200),
).map(readable)


def test_loader_reports_every_problem_as_a_located_message(capsys):
    counts: collections.Counter = collections.Counter()

    @settings(FUZZ, max_examples=1000)
    @given(text=TEXTS)
    def check(text):
        counts[check_load(text)] += 1

    check()
    print_counts(capsys, "policy loader fuzz", counts)
    assert counts.keys() == {"valid", "no-documents", "bad-yaml", "bad-policy"}


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)

# name, YAML text, how each expected error starts after "fuzz.yaml"
NASTY = [
    ("python-tag", "!!python/object/apply:os.system [echo pwned]\n", [": line 1: not valid YAML"]),
    ("billion-laughs", BILLION_LAUGHS, ["#0: apiVersion/kind: "]),
    ("recursive-alias", "&a [*a]\n", ["#0: apiVersion/kind: "]),
    ("unhashable-key", "? [a, b]\n: c\n", [": line 1: not valid YAML"]),
    (
        "tab-indent",
        SEED_TEXTS[0].replace("    memory: 1024Mi", "\tmemory: 1024Mi"),
        [": line 18: not valid YAML"],
    ),
    (
        "huge-int-memory",
        SEED_TEXTS[0].replace("memory: 1024Mi", "memory: " + "9" * 400),
        ["#0: spec.profiles[0].memory: "],
    ),
    (
        "date-memory",
        SEED_TEXTS[0].replace("memory: 1024Mi", "memory: 2024-01-01"),
        ["#0: spec.profiles[0].memory: "],
    ),
    (
        "null-profile",
        SEED_TEXTS[0].replace("  - name: GRID-P4-1Q\n", "  - null\n  - name: X\n"),
        ["#0: spec.profiles[0].name: ", "#0: spec.profiles[0].memory: "],
    ),
    (
        "bool-max-gpus",
        SEED_TEXTS[0].replace("maxGPUsPerPod: 1", "maxGPUsPerPod: yes"),
        ["#0: spec.maxGPUsPerPod: "],
    ),
    ("second-document-bad", SEED_TEXTS[0] + "---\nkind: ConfigMap\n", ["#1: apiVersion/kind: "]),
]


@pytest.mark.parametrize("name,text,expected", NASTY, ids=[n[0] for n in NASTY])
def test_nasty_yaml_gives_located_errors(name, text, expected):
    errors: list[str] = []
    loaded = load_documents(text, WHERE, errors)
    assert [p.source for p in loaded] == (["fuzz.yaml#0"] if name == "second-document-bad" else [])
    assert len(errors) == len(expected), errors
    assert all(e.startswith(WHERE + x) for e, x in zip(errors, expected, strict=False)), errors
    assert check_load(text) in ("bad-yaml", "bad-policy")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000 + "]" * 5000,
        "- " * 3000 + "x\n",
        "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 2000)),
    ],
)
def test_deeply_nested_yaml_is_an_error_not_a_crash(text):
    errors: list[str] = []
    assert load_documents(text, WHERE, errors) == []
    assert errors == [f"{WHERE}: not valid YAML: nested too deeply"]


@pytest.mark.parametrize("text", ["a: \x07\n", "apiVersion: v1\nkind: \x00\n", "\x1b[31m\n"])
def test_refused_characters_are_located_by_line(text):
    assert check_load(text) == "bad-yaml"
