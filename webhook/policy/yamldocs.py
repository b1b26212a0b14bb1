"""Parse YAML (multi-document) with errors that name the file and line, never a crash.

Both policy files and `review` inputs come from people; PyYAML reports a bad
character without a line mark and recurses once per nesting level, so a hostile
`[[[[...` would otherwise escape as RecursionError. Plain scalars are typed as kubectl
types them (yamlscalars.py), not by PyYAML's YAML 1.1 rules.

PyYAML, like kubectl v1.37 (sigs.k8s.io/yaml), keeps the last of two equal keys of a mapping
without a word: two `profiles:` would drop a class, and a container asking
`aliyun.com/gpu-mem` twice would be rewritten from the second. A repeated key is an error
here, naming both lines, in a policy and in a manifest alike (which did its author mean?).
The two errors people meet most get a hint: a tab in the indentation, and an unrendered Helm
template (`{{ .Values.x }}` is a YAML flow mapping whose key is another, "unhashable").
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

from webhook.api.text import UNRENDERED, template_in

from .yamlscalars import MERGE, json_key, plain_value, typed


class YamlError(ValueError):
    """Text that is not YAML; the message names where and, when known, the line."""


class _RepeatedKey(yaml.YAMLError):
    """A key that a mapping already holds (raised while constructing, where the marks are)."""

    def __init__(self, key: str, line: int, first: tuple[int, str]) -> None:
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with plain scalars typed as kubectl types them
    (yamlscalars.py), refusing a repeated key in a mapping."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return typed(value)[0]
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]

    def _plain(self, node: yaml.ScalarNode) -> Any:
        return plain_value(node.value)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Before the merge keys (`<<`) are flattened: a key written beside a merge overrides
        # the merged one, as YAML says, and is no repetition.
        seen: dict[Any, tuple[int, str]] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE:
                continue
            key = json_key(typed(key_node.value)[1] if key_node.style is None else key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _RepeatedKey(key_node.value, line, seen[key])
            seen[key] = (line, key_node.value)
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            # JSON has string keys only (yamlscalars.py `json_key`): `n:` is "false" to kubectl.
            key = json_key(
                typed(key_node.value)[1]
                if isinstance(key_node, yaml.ScalarNode) and key_node.style is None
                else self.construct_object(key_node, deep=deep)
            )
            problem = (
                "found unhashable key"
                if not isinstance(key, Hashable)
                else "found a null key, which kubectl refuses"
                if key is None
                else ""
            )
            if problem:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, problem, key_node.start_mark
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


for _tag in ("int", "float", "bool", "null"):
    # An explicit tag (`!!int 0o17`) is read as the same plain scalar would be.
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader._plain)


def _line(err: yaml.YAMLError, text: str) -> str:
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        return f" line {mark.line + 1}"
    position = getattr(err, "position", None)  # ReaderError: a refused character's offset
    return f" line {text.count(chr(10), 0, position) + 1}" if isinstance(position, int) else ""


def _hint(problem: str, text: str) -> str:
    if "'\\t'" in problem:
        return "; indent with spaces, not tabs"
    found = template_in(text)
    return f"; {found} {UNRENDERED}" if found else ""


def load_all(text: str, where: str) -> list[Any]:
    """Every document of `text`; raise `YamlError` naming `where` and the line."""
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except _RepeatedKey as err:
        line, written = err.first
        also = "" if written == err.key else f" ({written!r}, the same key to kubectl)"
        raise YamlError(
            f"{where}: line {err.line}: key {err.key!r} repeats line {line}{also}"
            ": kubectl would keep the last one without a word; keep one of them"
        ) from None
    except yaml.YAMLError as err:
        problem = (
            getattr(err, "problem", None)
            or getattr(err, "reason", None)
            or str(err).splitlines()[0]
        )
        raise YamlError(
            f"{where}:{_line(err, text)}: not valid YAML: {problem}{_hint(problem, text)}"
        ) from None
    except RecursionError:
        raise YamlError(f"{where}: not valid YAML: nested too deeply") from None
