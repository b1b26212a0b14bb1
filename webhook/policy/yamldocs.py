"""Parse YAML (multi-document) with errors that name the file and line, never a crash.

Both policy files and `review` inputs come from people; PyYAML reports a bad
character without a line mark and recurses once per nesting level, so a hostile
`[[[[...` would otherwise escape as RecursionError. PyYAML also keeps the last of two equal
keys of a mapping, where kubectl refuses the file (it decodes strictly, with
sigs.k8s.io/yaml): two `profiles:` would drop a class without a word, and a container asking
`aliyun.com/gpu-mem` twice would be rewritten from the second, so a repeated key is an error
here too, naming both lines. The two
errors people meet most get a hint: a tab in the indentation, and an unrendered Helm
template (`{{ .Values.x }}` is a YAML flow mapping whose key is another, "unhashable").
"""

from __future__ import annotations

import re
from typing import Any

import yaml

TEMPLATE = re.compile(r"\{\{.*?\}\}")


class YamlError(ValueError):
    """Text that is not YAML; the message names where and, when known, the line."""


class _RepeatedKey(yaml.YAMLError):
    """A key that a mapping already holds (raised while constructing, where the marks are)."""

    def __init__(self, key: str, line: int, first: int) -> None:
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a repeated key in a mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Before the merge keys (`<<`) are flattened: a key written beside a merge overrides
        # the merged one, as YAML says, and is no repetition.
        seen: dict[str, int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            line = key.start_mark.line + 1
            if key.value in seen:
                raise _RepeatedKey(key.value, line, seen[key.value])
            seen[key.value] = line
        return super().construct_mapping(node, deep=deep)


def _line(err: yaml.YAMLError, text: str) -> str:
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        return f" line {mark.line + 1}"
    position = getattr(err, "position", None)  # ReaderError: a refused character's offset
    return f" line {text.count(chr(10), 0, position) + 1}" if isinstance(position, int) else ""


def _hint(problem: str, text: str) -> str:
    if "'\\t'" in problem:
        return "; indent with spaces, not tabs"
    found = TEMPLATE.search(text)
    if found:
        return (
            f"; {found.group()} looks like an unrendered Helm template: render it first"
            " (`helm template RELEASE CHART | lwgpu review -`)"
        )
    return ""


def load_all(text: str, where: str) -> list[Any]:
    """Every document of `text`; raise `YamlError` naming `where` and the line."""
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except _RepeatedKey as err:
        raise YamlError(
            f"{where}: line {err.line}: key {err.key!r} repeats line {err.first}"
            " (kubectl refuses such a file): keep one of them"
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
