"""Load policy YAML (a file or a directory) into a validated `PolicySet`.

Every error names the file, the document index and the field path, and all of
them are reported at once, so an admin fixes a policy in one pass. A failed load
raises `PolicyError` and returns nothing: callers keep their last good policy.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from webhook.api import quantity
from webhook.api.names import MEM_LABEL
from webhook.api.text import shorten
from webhook.api.types import KubeObject

from .model import (
    API_VERSION,
    DEFAULT_COMPANIONS,
    DEFAULT_MEMORY_UNITS,
    KIND,
    Policy,
    PolicySet,
    Profile,
    frozen_map,
    globs_overlap,
    is_glob,
    pattern_rank,
)
from .yamldocs import YamlError, load_all

_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAMESPACE_PATTERN = re.compile(r"[a-z0-9*?]([-a-z0-9*?]{0,61}[a-z0-9*?])?")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}


class PolicyError(ValueError):
    """One or more policy documents are invalid; `errors` holds one message each."""

    def __init__(self, errors: list[str]):
        self.errors = tuple(errors)
        super().__init__("\n".join(errors))


def is_qualified_key(key: object) -> bool:
    """A Kubernetes label/annotation/resource key: optional DNS prefix, `/`, name."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(_LABEL_NAME.fullmatch(name))


def is_label_value(value: object) -> bool:
    """A valid label value (may be empty)."""
    return isinstance(value, str) and (value == "" or bool(_LABEL_NAME.fullmatch(value)))


class _Doc:
    """Collects errors for one document, each prefixed with where it is."""

    def __init__(self, where: str, errors: list[str]):
        self.where = where
        self.errors = errors

    def error(self, path: str, message: str) -> None:
        self.errors.append(f"{self.where}: {path}: {message}")

    def mapping(self, value: Any, path: str, allowed: set[str]) -> KubeObject:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(path, f"must be a mapping, got {type(value).__name__}")
            return {}
        for key in value:
            if key not in allowed:
                self.error(
                    f"{path}.{key}" if path else str(key),
                    f"unknown field (allowed: {', '.join(sorted(allowed))})",
                )
        return value

    def check(self, ok: bool, path: str, message: str) -> bool:
        if not ok:
            self.error(path, message)
        return ok


def _string_list(doc: _Doc, value: Any, path: str, default: list[str]) -> tuple[str, ...]:
    if value is None:
        return tuple(default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        doc.error(path, "must be a list of strings")
        return ()
    for index, pattern in enumerate(value):
        doc.check(
            bool(_NAMESPACE_PATTERN.fullmatch(pattern)),
            f"{path}[{index}]",
            f"{pattern!r} is not a namespace name or glob (a-z, 0-9, '-', '*', '?')",
        )
    return tuple(value)


def _profile(doc: _Doc, raw: Any, path: str) -> Profile | None:
    raw = doc.mapping(raw, path, {"name", "memory", "nodeSelector", "tolerations"})
    name = raw.get("name")
    ok = doc.check(
        isinstance(name, str) and bool(_PROFILE_NAME.fullmatch(name)),
        f"{path}.name",
        "is required: letters, digits, '-', '_', '.' (e.g. GRID-P4-2Q)",
    )
    memory = 0
    if "memory" not in raw:
        ok = doc.check(False, f"{path}.memory", "is required (a memory quantity such as 2048Mi)")
    else:
        try:
            memory = quantity.to_mib(raw["memory"])
            ok &= doc.check(
                quantity.parse(raw["memory"]) % quantity.MIB == 0,
                f"{path}.memory",
                f"{shorten(raw['memory'])!r} is not a whole number of MiB",
            )
        except quantity.QuantityError as err:
            ok = doc.check(False, f"{path}.memory", f"{err}; write e.g. 2048Mi or 2Gi")
    selector = raw.get("nodeSelector")
    if selector is None:
        selector = {MEM_LABEL: f"{memory}MiB"}
    elif not isinstance(selector, dict) or not selector:
        doc.error(f"{path}.nodeSelector", "must be a non-empty mapping of label key to value")
        selector, ok = {}, False
    for key, value in selector.items():
        ok &= doc.check(is_qualified_key(key), f"{path}.nodeSelector.{key}", "is not a label key")
        ok &= doc.check(
            is_label_value(value),
            f"{path}.nodeSelector.{key}",
            f"{value!r} is not a label value (quote it as a string)",
        )
    tolerations = raw.get("tolerations") or []
    if not isinstance(tolerations, list):
        doc.error(f"{path}.tolerations", "must be a list of tolerations")
        tolerations, ok = [], False
    for index, toleration in enumerate(tolerations):
        where = f"{path}.tolerations[{index}]"
        ok &= doc.check(
            isinstance(toleration, dict) and set(toleration) <= _TOLERATION_KEYS,
            where,
            f"must be a toleration with fields {sorted(_TOLERATION_KEYS)}",
        )
    if not ok:
        return None
    return Profile(name, memory, frozen_map(selector), tuple(frozen_map(t) for t in tolerations))


def _profiles(doc: _Doc, raw: Any) -> tuple[Profile, ...]:
    if not isinstance(raw, list) or not raw:
        doc.error("spec.profiles", "must list at least one lightweight GPU class")
        return ()
    profiles = [_profile(doc, item, f"spec.profiles[{i}]") for i, item in enumerate(raw)]
    valid = [p for p in profiles if p is not None]
    for attribute, label in (
        ("name", "name"),
        ("memory_mib", "memory"),
        ("node_selector", "nodeSelector"),
    ):
        seen: dict[Any, int] = {}
        for index, profile in enumerate(profiles):
            if profile is None:
                continue
            value = getattr(profile, attribute)
            key = tuple(sorted(value.items())) if isinstance(value, type(frozen_map())) else value
            if key in seen:
                doc.error(
                    f"spec.profiles[{index}].{label}",
                    f"duplicates spec.profiles[{seen[key]}] ({_show(value)})",
                )
            seen.setdefault(key, index)
    return tuple(sorted(valid, key=lambda p: p.memory_mib))


def _show(value: Any) -> str:
    if isinstance(value, int):
        return f"{value}Mi"
    if isinstance(value, str):
        return value
    return ",".join(f"{k}={v}" for k, v in sorted(value.items()))


def _memory_requests(doc: _Doc, raw: Any) -> tuple[dict[str, int], str | None, tuple[str, ...]]:
    present = isinstance(raw, dict)
    raw = doc.mapping(raw, "spec.memoryRequests", {"resources", "annotation", "companionResources"})
    resources = raw.get("resources", None if present else dict(DEFAULT_MEMORY_UNITS))
    units: dict[str, int] = {}
    if resources is not None and not isinstance(resources, dict):
        doc.error("spec.memoryRequests.resources", "must map resource names to units (Gi, Mi)")
        resources = {}
    for name, unit in (resources or {}).items():
        path = f"spec.memoryRequests.resources.{name}"
        if not doc.check(
            is_qualified_key(name) and "/" in name,
            path,
            "is not an extended resource name such as aliyun.com/gpu-mem",
        ):
            continue
        if not doc.check(name != "nvidia.com/gpu", path, "nvidia.com/gpu counts GPUs, not memory"):
            continue
        try:
            units[name] = quantity.unit_bytes(unit)
        except quantity.QuantityError as err:
            doc.error(path, str(err))
    annotation = raw.get("annotation", Policy.annotation)
    if annotation is not None and not is_qualified_key(annotation):
        doc.error("spec.memoryRequests.annotation", f"{annotation!r} is not an annotation key")
        annotation = None
    companions = raw.get("companionResources", list(DEFAULT_COMPANIONS))
    if not isinstance(companions, list) or not all(
        is_qualified_key(c) and "/" in c and c != "nvidia.com/gpu" for c in companions
    ):
        doc.error(
            "spec.memoryRequests.companionResources",
            "must list extended resource names such as nvidia.com/gpucores",
        )
        companions = []
    return units, annotation, tuple(companions)


def _policy(doc: _Doc, raw: Any) -> Policy | None:
    before = len(doc.errors)
    if not isinstance(raw, dict) or (raw.get("apiVersion"), raw.get("kind")) != (API_VERSION, KIND):
        found = (
            f"{raw.get('apiVersion')} {raw.get('kind')}"
            if isinstance(raw, dict)
            else f"a {type(raw).__name__}"
        )
        doc.error("apiVersion/kind", f"must be {API_VERSION} {KIND}, got {shorten(found, 60)}")
        return None
    raw = doc.mapping(raw, "", {"apiVersion", "kind", "metadata", "spec"})
    metadata = doc.mapping(raw.get("metadata"), "metadata", {"name", "labels", "annotations"})
    name = metadata.get("name")
    if not (isinstance(name, str) and _DNS_SUBDOMAIN.fullmatch(name)):
        doc.error("metadata.name", "is required (a DNS name such as default)")
        name = ""  # never used: the error means no Policy is built
    spec = doc.mapping(
        raw.get("spec"),
        "spec",
        {
            "namespaces",
            "profiles",
            "memoryRequests",
            "maxGPUsPerPod",
            "whenNoProfileFits",
            "discoverProfiles",
        },
    )
    namespaces = doc.mapping(spec.get("namespaces"), "spec.namespaces", {"include", "exclude"})
    include = _string_list(doc, namespaces.get("include"), "spec.namespaces.include", ["*"])
    exclude = _string_list(doc, namespaces.get("exclude"), "spec.namespaces.exclude", [])
    profiles = _profiles(doc, spec.get("profiles"))
    resources, annotation, companions = _memory_requests(doc, spec.get("memoryRequests"))
    max_gpus = spec.get("maxGPUsPerPod", Policy.max_gpus_per_pod)
    doc.check(
        type(max_gpus) is int and max_gpus >= 1,
        "spec.maxGPUsPerPod",
        f"must be a whole number >= 1, got {max_gpus!r}",
    )
    fits = spec.get("whenNoProfileFits", Policy.when_no_profile_fits)
    doc.check(
        fits in ("deny", "ignore"),
        "spec.whenNoProfileFits",
        f"must be deny or ignore, got {fits!r}",
    )
    discover = spec.get("discoverProfiles", Policy.discover_profiles)
    doc.check(isinstance(discover, bool), "spec.discoverProfiles", "must be true or false")
    if len(doc.errors) > before:
        return None
    return Policy(
        name=name,
        source=doc.where,
        profiles=profiles,
        include=include,
        exclude=exclude,
        memory_resources=frozen_map(resources),
        annotation=annotation,
        companion_resources=companions,
        max_gpus_per_pod=max_gpus,
        when_no_profile_fits=fits,
        discover_profiles=discover,
    )


def _conflicts(policies: list[Policy], errors: list[str]) -> None:
    """Two policies may not claim a namespace with equally specific patterns."""
    for i, first in enumerate(policies):
        for second in policies[i + 1 :]:
            if first.name == second.name:
                errors.append(
                    f"{second.source}: metadata.name: policy {second.name!r} is "
                    f"already defined in {first.source}"
                )
            for a in first.include:
                for b in second.include:
                    if pattern_rank(a) != pattern_rank(b):
                        continue
                    if (a == b) if not is_glob(a) else globs_overlap(a, b):
                        errors.append(
                            f"{second.source}: spec.namespaces.include: {b!r} and {a!r} of policy "
                            f"{first.name!r} ({first.source}) are equally specific and can match "
                            f"the same namespace; name namespaces exactly or narrow one glob"
                        )


def policy_files(path: Path) -> list[Path]:
    """The YAML files of a policy path; ConfigMap volumes hide their `..data` dirs with dots."""
    if path.is_dir():
        return sorted(
            p
            for p in path.iterdir()
            if p.suffix in (".yaml", ".yml") and not p.name.startswith(".") and p.is_file()
        )
    return [path]


def load_documents(text: str, where: str, errors: list[str]) -> list[Policy]:
    """Validate every document of one YAML text; errors go to `errors`."""
    try:
        documents = load_all(text, where)
    except YamlError as err:
        errors.append(str(err))
        return []
    policies = []
    for index, raw in enumerate(documents):
        if raw is None:
            continue
        policy = _policy(_Doc(f"{where}#{index}", errors), raw)
        if policy is not None:
            policies.append(policy)
    return policies


def load_policies(path: str | os.PathLike[str]) -> PolicySet:
    """Load and validate every policy under `path`; raise `PolicyError` listing all errors."""
    root = Path(path)
    errors: list[str] = []
    if not root.exists():
        raise PolicyError([f"{root}: no such file or directory"])
    policies: list[Policy] = []
    for file in policy_files(root):
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            errors.append(f"{file}: cannot read: {err}")
            continue
        policies.extend(load_documents(text, str(file), errors))
    if not policies and not errors:
        errors.append(f"{root}: no {KIND} documents found")
    _conflicts(policies, errors)
    if errors:
        raise PolicyError(errors)
    return PolicySet(tuple(policies))
