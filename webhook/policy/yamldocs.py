"""Parse YAML (multi-document) with errors that name the file and line, never a crash.

Both policy files and `review` inputs come from people; PyYAML reports a bad
character without a line mark and recurses once per nesting level, so a hostile
`[[[[...` would otherwise escape as RecursionError.
"""

from __future__ import annotations

from typing import Any

import yaml


class YamlError(ValueError):
    """Text that is not YAML; the message names where and, when known, the line."""


def _line(err: yaml.YAMLError, text: str) -> str:
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        return f" line {mark.line + 1}"
    position = getattr(err, "position", None)  # ReaderError: a refused character's offset
    return f" line {text.count(chr(10), 0, position) + 1}" if isinstance(position, int) else ""


def load_all(text: str, where: str) -> list[Any]:
    """Every document of `text`; raise `YamlError` naming `where` and the line."""
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        problem = (
            getattr(err, "problem", None)
            or getattr(err, "reason", None)
            or str(err).splitlines()[0]
        )
        raise YamlError(f"{where}:{_line(err, text)}: not valid YAML: {problem}") from None
    except RecursionError:
        raise YamlError(f"{where}: not valid YAML: nested too deeply") from None
