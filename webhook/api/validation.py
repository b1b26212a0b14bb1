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
            errors.append((name, f"must be a string, got {given!r}"))
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
                ("tolerationSeconds", f"must be a whole number of seconds, got {seconds!r}")
            )
        if effect != "NoExecute":
            errors.append(("effect", "must be NoExecute when tolerationSeconds is set"))
    if operator in ("Equal", ""):
        if not is_label_value(value):
            errors.append(("value", f"{value!r} is not a label value"))
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
