"""YAML that `kubectl apply -f -` reads back exactly as it was written.

PyYAML writes YAML 1.1 as PyYAML resolves it, but kubectl and the apiserver read YAML
with Go's go-yaml (via `sigs.k8s.io/yaml`), whose implicit typing differs (go-yaml v2,
`resolve.go`, `resolve`): `y`/`n` are booleans, `1e5` and `1e-4` are floats without a
dot, `0o17` and `0b101` are integers, underscores are ignored in numbers, and a date is a
timestamp that comes back re-formatted. A plain scalar that Go would read as anything but
that string is written quoted, so strings (env values, ConfigMap data, label values) stay
strings.

`dump_manifest` also puts an object's top-level keys in Kubernetes' order, so `-o yaml`
and both sides of `-o diff` read the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml


def _spellings(word: str) -> set[str]:
    """`null`, `Null`, `NULL`: the three spellings go-yaml accepts of each word."""
    first = next(i for i, c in enumerate(word) if c.isalpha())
    return {word, word[:first] + word[first].upper() + word[first + 1 :], word.upper()}


# go-yaml v2 resolve.go: the words its resolve table maps to a boolean, null or float
# (`.NaN` is its one mixed spelling; quoting `.Nan` too costs nothing).
_WORDS = ("y", "yes", "on", "true", "n", "no", "off", "false", "null", ".nan", ".inf")
_GO_WORDS = frozenset(
    {"~", "<<", ".NaN"}.union(*(_spellings(w) for w in _WORDS)).union(
        *(_spellings(sign + ".inf") for sign in "+-")
    )
)
# parseTimestamp's formats all start with a date: 2006-01-02 (then T or space and a time).
_TIMESTAMP = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([Tt ]|$)")


def _hex_float(text: str) -> float:
    """strconv.ParseFloat's hex form only (`0x1p-2`): `float.fromhex` also takes bare digits."""
    if not re.match(r"[-+]?0[xX].*[pP]", text):
        raise ValueError(text)
    return float.fromhex(text)


def _go_number(text: str) -> bool:
    """True when go-yaml reads `text` as an int or a float (strconv, base 0, `_` dropped)."""
    plain = text.replace("_", "")
    for parse in (float, lambda s: int(s, 0), _hex_float):
        try:
            parse(plain)
        except ValueError:
            continue
        return True
    return False


def go_reads_as_other(text: str) -> bool:
    """True when Go's YAML would resolve the plain scalar `text` to something but a string."""
    if text == "" or text in _GO_WORDS:
        return True
    # go-yaml tries numbers and timestamps only for scalars that start like one.
    if text[0] not in "0123456789+-.":
        return False
    return _go_number(text) or bool(_TIMESTAMP.match(text))


class GoSafeDumper(yaml.SafeDumper):
    """A SafeDumper that quotes every string Go's YAML would read as another type."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if go_reads_as_other(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="'")
    return dumper.represent_str(data)


GoSafeDumper.add_representer(str, _represent_str)


class BlockTextDumper(GoSafeDumper):
    """A GoSafeDumper that writes text of several lines as a literal block (`|`), as people
    write CEL in admission policies."""


def _represent_block(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        # PyYAML falls back to a quoted scalar for text a literal block cannot hold exactly.
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return _represent_str(dumper, data)


BlockTextDumper.add_representer(str, _represent_block)


def dump_all(documents: Iterable[Any], block_text: bool = False) -> str:
    """The documents as a multi-document YAML stream, keys in the order they were given;
    with `block_text`, text of several lines as literal blocks, and characters beyond ASCII
    as themselves (a block cannot hold an escape)."""
    dumper = BlockTextDumper if block_text else GoSafeDumper
    return yaml.dump_all(documents, Dumper=dumper, sort_keys=False, allow_unicode=block_text)


# The order `kubectl get -o yaml` and every Kubernetes example put an object's top-level keys in.
_KUBE_ORDER = ("apiVersion", "kind", "metadata", "spec")


def kube_order(obj: Any) -> Any:
    """`obj` with apiVersion, kind, metadata and spec first, the other keys as written."""
    if not isinstance(obj, dict):
        return obj
    first = {key: obj[key] for key in _KUBE_ORDER if key in obj}
    return first | {key: value for key, value in obj.items() if key not in first}


def dump_manifest(obj: Any) -> str:
    """One object as a YAML document, keys in Kubernetes' order (`-o yaml` and `-o diff`)."""
    return dump_all([kube_order(obj)])
