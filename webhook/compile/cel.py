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
from collections.abc import Iterable, Mapping, Sequence


class Unexpressible(ValueError):
    """A policy feature the admission policy cannot check as the webhook does; the message
    names it. Compiling refuses the policy rather than emit a weaker check."""


def string(text: str) -> str:
    """A CEL string literal: every escape JSON writes is one CEL reads too."""
    return json.dumps(text, ensure_ascii=False)


def strings(texts: Iterable[str]) -> str:
    """A CEL list of string literals."""
    return "[" + ", ".join(string(t) for t in texts) + "]"


def string_map(pairs: Mapping[str, str]) -> str:
    """A CEL map of strings to strings, keys sorted."""
    return "{" + ", ".join(f"{string(k)}: {string(v)}" for k, v in sorted(pairs.items())) + "}"


def maps(items: Iterable[Mapping[str, str]]) -> str:
    """A CEL list of string maps."""
    return "[" + ", ".join(string_map(m) for m in items) + "]"


def dig(root: str, path: Sequence[str], default: str) -> str:
    """`root.a.b` when every step is present and not null, else `default`."""
    steps = []
    at = root
    for name in path:
        steps.append(f"has({at}.{name})")
        at = f"{at}.{name}"
        steps.append(f"{at} != null")
    return f"({' && '.join(steps)} ? {at} : {default})" if steps else root


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
