"""Kubernetes' own validation rules for the values lwgpu writes into pods.

A policy supplies node selector keys and values, annotation keys and tolerations that the
webhook copies into every GPU pod it rewrites; one invalid value there would make the
apiserver refuse all of them. The policy loader checks each with the same rules the
apiserver applies, so the mistake surfaces once, at load, with its field:

- qualified names and label values: `k8s.io/apimachinery/pkg/util/validation`
  (`IsQualifiedName`, `IsValidLabelValue`, `IsDNS1123Subdomain`);
- tolerations: `pkg/apis/core/validation/validation.go`, `ValidateTolerations` and
  `validateTaintEffect`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .text import as_yaml

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
NAME_LIMIT = 63  # the name part of a qualified name, and a label value
PREFIX_LIMIT = 253  # a DNS subdomain

TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def is_qualified_name(key: object) -> bool:
    """A label, annotation or resource key: an optional DNS-subdomain prefix and `/`, a name."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and not (0 < len(prefix) <= PREFIX_LIMIT and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= NAME_LIMIT and bool(_NAME.fullmatch(name))


def is_dns_subdomain(name: object) -> bool:
    """A DNS subdomain (RFC 1123): what most object names must be."""
    return (
        isinstance(name, str) and len(name) <= PREFIX_LIMIT and bool(_DNS_SUBDOMAIN.fullmatch(name))
    )


def is_label_value(value: object) -> bool:
    """A label value: empty, or at most 63 alphanumerics, `-`, `_`, `.` inside alphanumerics."""
    return isinstance(value, str) and (
        value == "" or (len(value) <= NAME_LIMIT and bool(_NAME.fullmatch(value)))
    )


def _yaml_type(value: object) -> str:
    """What a policy author wrote, in YAML's words rather than Python's."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else "not a string"


def _characters(found: list[str]) -> str:
    """`a space and ':'` for a message; at most four characters are named."""
    named = ["a space" if c == " " else "a tab" if c == "\t" else repr(c) for c in found[:4]]
    if len(found) > 4:
        return ", ".join(named) + " and others"
    return " and ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)


def label_value_problem(value: object) -> str | None:
    """What is wrong with `value` as a label value (`IsValidLabelValue`), None when nothing is.

    The answer names the one rule broken (a space, the length, the first character), so the
    author need not compare the value with the whole grammar.
    """
    if not isinstance(value, str):
        kind = _yaml_type(value)
        if kind in ("a number", "a boolean"):
            return f"it is {kind}, not a string; quote it: '{as_yaml(value)}'"
        if value is None:
            return "write a value, or '' for an empty one"
        return f"it is {kind}, not a string"
    if is_label_value(value):
        return None
    if len(value) > NAME_LIMIT:
        return f"it is {len(value)} characters long (at most {NAME_LIMIT})"
    bad = sorted({c for c in value if not (c.isascii() and (c.isalnum() or c in "-_."))})
    if bad:
        return f"it contains {_characters(bad)} (allowed: letters, digits, '-', '_', '.')"
    end = "starts" if not value[0].isalnum() else "ends"
    edge = value[0] if end == "starts" else value[-1]
    return f"it {end} with {edge!r} (it must start and end with a letter or digit)"


def label_value_error(value: object, what: str = "a label value", space: str = "") -> str | None:
    """The message for `value` that is not `what` (a label value), None when it is one.

    A string whose only fault is whitespace gets a suggestion, its whitespace runs replaced
    by `space`; a number or boolean is told to be quoted.
    """
    problem = label_value_problem(value)
    if problem is None:
        return None
    message = f"{as_yaml(value)} is not {what}: {problem}"
    fixed = space.join(value.split()) if isinstance(value, str) else ""
    return message + (f"; write {fixed!r}" if fixed and is_label_value(fixed) else "")


def toleration_errors(toleration: object) -> list[tuple[str, str]]:
    """What the apiserver would refuse in one toleration, as (field, message) pairs.

    Field names are relative to the toleration (`operator`, `effect`, ...); an empty
    field means the toleration as a whole.
    """
    if not isinstance(toleration, Mapping):
        return [("", "must be a mapping with fields " + ", ".join(TOLERATION_FIELDS))]
    errors = [
        (str(f), "is not a toleration field") for f in toleration if f not in TOLERATION_FIELDS
    ]
    key = toleration.get("key", "")
    operator = toleration.get("operator", "")
    value = toleration.get("value", "")
    effect = toleration.get("effect", "")
    for name, given in (("key", key), ("operator", operator), ("value", value), ("effect", effect)):
        if not isinstance(given, str):
            errors.append((name, f"must be a string, got {as_yaml(given)}"))
    if errors:
        return errors
    if key and not is_qualified_name(key):
        errors.append(("key", f"{key!r} is not a label key (a qualified name)"))
    if not key and operator != "Exists":
        errors.append(
            ("operator", "must be Exists when key is empty (which means: match every taint)")
        )
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None:
        if type(seconds) is not int:
            errors.append(
                ("tolerationSeconds", f"must be a whole number of seconds, got {as_yaml(seconds)}")
            )
        if effect != "NoExecute":
            errors.append(("effect", "must be NoExecute when tolerationSeconds is set"))
    if operator in ("Equal", ""):
        if not is_label_value(value):
            errors.append(("value", str(label_value_error(value))))
    elif operator == "Exists":
        if value:
            errors.append(("value", f"must be empty when operator is Exists, got {value!r}"))
    else:
        errors.append(("operator", f"{operator!r} is not supported: use Equal or Exists"))
    if effect and effect not in TAINT_EFFECTS:
        errors.append(
            (
                "effect",
                f"{effect!r} is not supported: use {', '.join(TAINT_EFFECTS)} or leave it empty",
            )
        )
    return errors
