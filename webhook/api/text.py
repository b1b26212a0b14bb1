"""Bounded renderings of user input for messages, warnings and log lines."""

import json
import re

WARNING_LIMIT = 120  # characters of one admission warning; kubectl prints each on one line
# Characters of the `lwgpu.io/rewritten-from` audit trail, written by the webhook's rewrite and
# by the compiled MutatingAdmissionPolicy alike.
AUDIT_LIMIT = 1024


# `{{ .Values.gpuMemory }}`: what a chart's template holds before `helm template` renders it.
_TEMPLATE = re.compile(r"\{\{.*?\}\}")


UNRENDERED = (
    "looks like an unrendered Helm template: render it first"
    " (`helm template RELEASE CHART | lwgpu review -`)"
)


def template_in(text: str) -> str | None:
    """The first unrendered Helm template `{{ ... }}` in `text` (None: it holds none)."""
    found = _TEMPLATE.search(text)
    return found.group() if found else None


def shorten(value: object, limit: int = 40) -> str:
    """Render a user-supplied value for a message without echoing unbounded input.

    Strings are shown as written; anything else as its `repr`. Longer text is cut to
    `limit` characters, the last one an ellipsis.
    """
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_yaml(value: object, limit: int = 40) -> str:
    """A value a user wrote in YAML, for a message in YAML's words, not Python's: `null
    (empty)`, `true`, `2`, `'text'` (quoted, so an empty or padded one shows), a mapping or a
    list in flow style (JSON, which YAML reads too)."""
    if value is None:
        return "null (empty)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(shorten(value, limit))
    if isinstance(value, dict | list):
        try:
            return shorten(json.dumps(value, default=str), limit)
        except (ValueError, RecursionError):  # a YAML alias inside itself (`&a [*a]`)
            return "a mapping" if isinstance(value, dict) else "a list"
    return shorten(value, limit)
