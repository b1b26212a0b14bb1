"""Validate policy YAML text into `Policy` objects, and policies loaded together into a
`PolicySet`.

Every error names the file, the document index and the field path, and all of
them are reported at once, so an admin fixes a policy in one pass. A failed load
raises `PolicyError` and returns nothing: callers keep their last good policy.
Reading the files is `webhook.files`' work; this module sees text only.
"""

from __future__ import annotations

import re
from typing import Any

from webhook.api import quantity
from webhook.api.text import as_yaml
from webhook.api.validation import is_dns_subdomain, is_qualified_name

from .document import PolicyDocument, PolicyError
from .model import (
    API_VERSION,
    DEFAULT_COMPANIONS,
    DEFAULT_MEMORY_UNITS,
    KIND,
    Policy,
    PolicySet,
    frozen_map,
    globs_overlap,
    is_glob,
    pattern_rank,
)
from .profiles import load_profiles
from .sharing import load_leave_alone, load_placement, load_whole_gpu_pods
from .yamldocs import YamlError, load_all

_NAMESPACE_PATTERN = re.compile(r"[a-z0-9*?]([-a-z0-9*?]{0,61}[a-z0-9*?])?")


def _string_list(doc: PolicyDocument, value: Any, path: str, default: list[str]) -> tuple[str, ...]:
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


def _memory_requests(
    doc: PolicyDocument, raw: Any
) -> tuple[dict[str, int], str | None, tuple[str, ...]]:
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
            is_qualified_name(name) and "/" in name,
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
    if annotation is not None and not is_qualified_name(annotation):
        doc.error(
            "spec.memoryRequests.annotation", f"{as_yaml(annotation)} is not an annotation key"
        )
        annotation = None
    companions = raw.get("companionResources", list(DEFAULT_COMPANIONS))
    if not isinstance(companions, list) or not all(
        is_qualified_name(c) and "/" in c and c != "nvidia.com/gpu" for c in companions
    ):
        doc.error(
            "spec.memoryRequests.companionResources",
            "must list extended resource names such as nvidia.com/gpucores",
        )
        companions = []
    return units, annotation, tuple(companions)


def _policy(doc: PolicyDocument, raw: Any) -> Policy | None:
    before = len(doc.errors)
    if not isinstance(raw, dict) or (raw.get("apiVersion"), raw.get("kind")) != (API_VERSION, KIND):
        found = (
            " and ".join(
                f"{field} {as_yaml(raw[field], 60)}" if field in raw else f"no {field}"
                for field in ("apiVersion", "kind")
            )
            if isinstance(raw, dict)
            else as_yaml(raw, 60)
        )
        doc.error("apiVersion/kind", f"must be {API_VERSION} {KIND}, got {found}")
        return None
    raw = doc.mapping(raw, "", {"apiVersion", "kind", "metadata", "spec"})
    metadata = doc.mapping(raw.get("metadata"), "metadata", {"name", "labels", "annotations"})
    name = metadata.get("name")
    if not (isinstance(name, str) and is_dns_subdomain(name)):
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
            "wholeGPUPods",
            "leaveAlone",
            "placement",
            "allowSkip",
            "mode",
        },
    )
    namespaces = doc.mapping(spec.get("namespaces"), "spec.namespaces", {"include", "exclude"})
    include = _string_list(doc, namespaces.get("include"), "spec.namespaces.include", ["*"])
    exclude = _string_list(doc, namespaces.get("exclude"), "spec.namespaces.exclude", [])
    placement = load_placement(doc, spec.get("placement"))
    profiles = load_profiles(doc, spec.get("profiles"), placement)
    resources, annotation, companions = _memory_requests(doc, spec.get("memoryRequests"))
    max_gpus = spec.get("maxGPUsPerPod", Policy.max_gpus_per_pod)
    doc.check(
        type(max_gpus) is int and max_gpus >= 1,
        "spec.maxGPUsPerPod",
        f"must be a whole number >= 1, got {as_yaml(max_gpus)}",
    )
    fits = spec.get("whenNoProfileFits", Policy.when_no_profile_fits)
    doc.check(
        fits in ("deny", "ignore"),
        "spec.whenNoProfileFits",
        f"must be deny or ignore, got {as_yaml(fits)}",
    )
    discover = spec.get("discoverProfiles", Policy.discover_profiles)
    doc.check(
        isinstance(discover, bool),
        "spec.discoverProfiles",
        f"must be true or false, got {as_yaml(discover)}",
    )
    whole_gpu_pods = load_whole_gpu_pods(doc, spec.get("wholeGPUPods"))
    leave_alone = load_leave_alone(doc, spec.get("leaveAlone"))
    allow_skip = spec.get("allowSkip", Policy.allow_skip)
    doc.check(
        isinstance(allow_skip, bool),
        "spec.allowSkip",
        f"must be true or false, got {as_yaml(allow_skip)}",
    )
    mode = spec.get("mode", Policy.mode)
    doc.check(
        mode in ("enforce", "audit"),
        "spec.mode",
        f"must be enforce or audit, got {as_yaml(mode)}",
    )
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
        whole_gpu_pods=whole_gpu_pods,
        leave_alone=leave_alone,
        placement=placement,
        allow_skip=allow_skip,
        mode=mode,
        warnings=tuple(doc.warnings),
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
                    where = f"{second.source}: spec.namespaces.include: policies {first.name!r}"
                    if not is_glob(a) and a == b:
                        errors.append(
                            f"{where} ({first.source}) and {second.name!r} both claim namespace "
                            f"{a}; keep it in one of them"
                        )
                    elif is_glob(a) and globs_overlap(a, b):
                        errors.append(
                            f"{where} ({first.source}) and {second.name!r} both claim, equally "
                            f"specifically, the namespaces that {a!r} and {b!r} both match; name "
                            "namespaces exactly or narrow one glob"
                        )


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
        policy = _policy(PolicyDocument(f"{where}#{index}", errors), raw)
        if policy is not None:
            policies.append(policy)
    return policies


def policy_set(policies: list[Policy], errors: list[str]) -> PolicySet:
    """The policies loaded together, as one set; raise `PolicyError` listing `errors` (those
    of reading and validating them) and every conflict between them.

    Policies loaded together are checked together, as the server loads one directory: two
    files that claim the same namespace equally specifically are an error even when each
    alone is valid.
    """
    _conflicts(policies, errors)
    if errors:
        raise PolicyError(errors)
    return PolicySet(tuple(policies))
