"""CEL text: literals for policy values and guarded reads of fields a user may leave out.

Kubernetes compiles admission policy CEL with homogeneous aggregate literals
(`staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`, `cel.HomogeneousAggregateLiterals`):
a list or map literal holds one type, so a policy's values become one literal per kind of
value (a list of strings, a map of strings), never a mixed record.

Every read of a field goes through `dig`: `has()` on each step, and `!= null` too, since an
object may reach CEL with a field present and null (deploy/base/webhook-scope.yaml says when),
and an expression that errors makes the apiserver apply `failurePolicy: Fail` to the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict

from webhook.api.workload import pointer

REFERENCE = re.compile(r"variables\.([A-Za-z_][A-Za-z0-9_]*)")


class Named(TypedDict):
    """A variable or a match condition: a name and a CEL expression."""

    name: str
    expression: str


class Unexpressible(ValueError):
    """A policy feature the admission policy cannot check as the webhook does; the message
    names it. Compiling refuses the policy rather than emit a weaker check."""


def used(variables: Sequence[Named], expressions: Iterable[str]) -> list[Named]:
    """The variables `expressions` read, and those they read in turn, in their order: each
    policy carries only what it evaluates."""
    wanted = {name for text in expressions for name in REFERENCE.findall(text)}
    for variable in reversed(variables):
        if variable["name"] in wanted:
            wanted.update(REFERENCE.findall(variable["expression"]))
    return [v for v in variables if v["name"] in wanted]


def string(text: str) -> str:
    """A CEL string literal: every escape JSON writes is one CEL reads too."""
    return json.dumps(text, ensure_ascii=False)


def strings(texts: Iterable[str]) -> str:
    """A CEL list of string literals."""
    return "[" + ", ".join(string(t) for t in texts) + "]"


def string_map(pairs: Mapping[str, str]) -> str:
    """A CEL map of strings to strings, keys sorted."""
    return "{" + ", ".join(f"{string(k)}: {string(v)}" for k, v in sorted(pairs.items())) + "}"


def int_map(pairs: Mapping[str, int]) -> str:
    """A CEL map of strings to ints, keys sorted."""
    return "{" + ", ".join(f"{string(k)}: {v}" for k, v in sorted(pairs.items())) + "}"


def maps(items: Iterable[Mapping[str, str]]) -> str:
    """A CEL list of string maps."""
    return "[" + ", ".join(string_map(m) for m in items) + "]"


def present(root: str, path: Sequence[str]) -> str:
    """Whether `root.a.b` is there: every step present and not null."""
    steps = []
    at = root
    for name in path:
        steps.append(f"has({at}.{name})")
        at = f"{at}.{name}"
        steps.append(f"{at} != null")
    return " && ".join(steps)


def dig(root: str, path: Sequence[str], default: str) -> str:
    """`root.a.b` when every step is present and not null, else `default`."""
    return f"({present(root, path)} ? {root}.{'.'.join(path)} : {default})" if path else root


def pointer_literal(path: Sequence[str]) -> str:
    """A JSON pointer to `path` as a CEL string, escaped here rather than in CEL."""
    return string(pointer(path))


def escaped(key: str) -> str:
    """A JSON pointer token for the map key the CEL string `key` holds (RFC 6901: `~`, `/`):
    `jsonpatch.escapeKey` is declared only for mutation expressions, not their variables."""
    return f"{key}.replace('~', '~0').replace('/', '~1')"


def instance(path: Sequence[str], fields: Mapping[str, str]) -> str:
    """A value for a JSON patch as a CEL object: `Object.spec.tolerations{key: "k"}`. The
    apiserver holds an object's type name to the field path from the root object, and its
    nested objects' to their own (`apiserver/pkg/cel/mutation/dynamic`,
    `CheckTypeNamesMatchFieldPathNames`); the fields themselves are not typed."""
    members = ", ".join(f"{name}: {value}" for name, value in fields.items())
    return f"Object.{'.'.join(path)}{{{members}}}"


def choose(cases: Sequence[tuple[str, str]], otherwise: str) -> str:
    """`c1 ? v1 : c2 ? v2 : otherwise`, one line per case."""
    text = otherwise
    for condition, value in reversed(cases):
        text = f"{condition} ? {value}\n: {text}"
    return text


def any_of(terms: Iterable[str]) -> str:
    """The terms ORed, in parentheses; `false` for none."""
    listed = list(terms)
    return "(" + " || ".join(listed) + ")" if listed else "false"


def all_of(terms: Iterable[str]) -> str:
    """The terms ANDed, leaving out `true`; `true` for none."""
    listed = [t for t in terms if t != "true"]
    return " && ".join(listed) if listed else "true"
