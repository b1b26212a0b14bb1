"""`spec.profiles` of a policy: each lightweight GPU class, validated as the apiserver would.

A class's `nodeSelector` and `tolerations` are copied into every pod the webhook rewrites,
so each value is held to Kubernetes' own rules (`webhook.api.validation`): one typo here
would otherwise make the apiserver refuse every GPU pod. `nodeLabels` names further labels
every node of the class carries (the cloud sets `aliyun.accelerator/nvidia_name` beside
`nvidia_mem`, GPU Feature Discovery `nvidia.com/gpu.product` beside `nvidia.com/gpu.memory`),
so a pod that pins a class by one of them is understood.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from webhook.api import quantity
from webhook.api.names import GFD_MEMORY_LABEL, GFD_MEMORY_VALUE, MEM_LABEL, MEM_VALUE
from webhook.api.text import shorten
from webhook.api.validation import (
    is_qualified_name,
    label_value_error,
    toleration_errors,
)

from .document import PolicyDocument
from .model import Placement, Profile, frozen_map

_FIELDS = {"name", "memory", "nodeSelector", "nodeLabels", "tolerations"}
_DECIMAL = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<suffix>[kMGTPE])")
_POWERS = {"k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


def _memory(doc: PolicyDocument, raw: dict[str, Any], path: str) -> int | None:
    if "memory" not in raw:
        doc.error(f"{path}.memory", "is required (a memory quantity such as 2048Mi)")
        return None
    try:
        memory = quantity.to_mib(raw["memory"])
        whole = quantity.parse(raw["memory"]) % quantity.MIB == 0
    except quantity.QuantityError as err:
        doc.error(f"{path}.memory", quantity.with_fix(err, "write e.g. 2048Mi or 2Gi"))
        return None
    if not whole:
        doc.error(f"{path}.memory", _not_whole(raw["memory"]))
        return None
    return memory


def _not_whole(value: Any) -> str:
    """Why a memory quantity is not whole MiB, with the binary spelling when that is whole."""
    text = str(value)
    if match := _DECIMAL.fullmatch(text):
        power, number = _POWERS[match["suffix"]], match["number"]
        binary = f"{number}{'K' if match['suffix'] == 'k' else match['suffix']}i"
        if (Decimal(number) * 1024**power) % quantity.MIB == 0:
            return (
                f"{text!r} is read as {number} x 10^{3 * power} bytes (a decimal suffix), not a "
                f"whole number of MiB; write {binary} for binary units"
            )
    elif re.fullmatch(r"[0-9]+", text):
        return f"{text!r} is read as bytes, not a whole number of MiB; write {text}Mi for MiB"
    return f"{shorten(value)!r} is not a whole number of MiB; write e.g. 2048Mi or 2Gi"


def _name(doc: PolicyDocument, name: Any, path: str) -> bool:
    """A class name is a label value (pods may be pinned by it), and not empty."""
    if name is None or name == "":
        doc.error(path, "is required: letters, digits, '-', '_', '.' (e.g. GRID-P4-2Q)")
        return False
    # As label-node writes a GPU's name: spaces become '-' (GRID P4-2Q -> GRID-P4-2Q).
    message = label_value_error(name, "a class name", space="-")
    if message is not None:
        doc.error(path, message)
    return message is None


def _labels(doc: PolicyDocument, value: Any, path: str, *, required: bool) -> dict[str, str] | None:
    """A label map (`nodeSelector`, `nodeLabels`), every key and value valid, else None."""
    if not isinstance(value, dict) or (required and not value):
        doc.error(path, "must be a non-empty mapping of label key to value")
        return None
    ok = True
    for key, label in value.items():
        ok &= doc.check(is_qualified_name(key), f"{path}.{key}", "is not a label key")
        # As label-node writes labels: a GPU's name with '-' for spaces (GRID T4 4Q ->
        # GRID-T4-4Q), its memory without them ("2048 MiB" means the label 2048MiB).
        memory = key in (MEM_LABEL, GFD_MEMORY_LABEL)
        message = label_value_error(label, space="" if memory else "-")
        if message is not None:
            doc.error(f"{path}.{key}", message)
            ok = False
        elif key == MEM_LABEL and not MEM_VALUE.fullmatch(label):
            doc.warn(
                f"{path}.{key}",
                _not_memory_label(label, "'<MiB>MiB', as nvidia-smi prints it", "MiB"),
            )
        elif key == GFD_MEMORY_LABEL and not GFD_MEMORY_VALUE.fullmatch(label):
            doc.warn(
                f"{path}.{key}",
                _not_memory_label(
                    label, "MiB as an integer, as GPU Feature Discovery writes it", ""
                ),
            )
    return dict(value) if ok else None


def _not_memory_label(label: str, form: str, unit: str) -> str:
    """Why a memory label's value matches no node (nodes carry it in `form`: "<MiB>`unit`"),
    and the value meant where it can tell."""
    text = label.removesuffix("B")
    try:
        mib = int(text) if text.isdigit() else quantity.to_mib(text)
        whole = text.isdigit() or quantity.parse(text) % quantity.MIB == 0
    except quantity.QuantityError:
        mib, whole = 0, False
    fix = f"; write {mib}{unit}" if whole and mib > 0 else ""
    return f"{label!r} is not how nodes carry their GPU memory ({form}), so no node matches it{fix}"


def _tolerations(doc: PolicyDocument, value: Any, path: str) -> list[dict[str, Any]] | None:
    if value is None:
        return []
    if not isinstance(value, list):
        doc.error(path, "must be a list of tolerations")
        return None
    ok = True
    for index, toleration in enumerate(value):
        for field, message in toleration_errors(toleration):
            doc.error(f"{path}[{index}]" + (f".{field}" if field else ""), message)
            ok = False
    return value if ok else None


def _profile(doc: PolicyDocument, raw: Any, path: str) -> Profile | None:
    raw = doc.mapping(raw, path, _FIELDS)
    name = raw.get("name")
    named = _name(doc, name, f"{path}.name")
    memory = _memory(doc, raw, path)
    selector: dict[str, str] | None = {MEM_LABEL: f"{memory}MiB"}
    if raw.get("nodeSelector") is not None:
        selector = _labels(doc, raw["nodeSelector"], f"{path}.nodeSelector", required=True)
    labels = _labels(doc, raw.get("nodeLabels", {}), f"{path}.nodeLabels", required=False)
    for key, value in (labels or {}).items():
        if selector is not None and selector.get(key, value) != value:
            doc.error(f"{path}.nodeLabels.{key}", f"contradicts nodeSelector {key}={selector[key]}")
            labels = None
    tolerations = _tolerations(doc, raw.get("tolerations"), f"{path}.tolerations")
    if memory is not None and selector is not None:
        _promises_more(doc, raw["memory"], memory, selector, path)
    if not named or memory is None or selector is None or labels is None or tolerations is None:
        return None
    assert isinstance(name, str)  # checked above; named is False otherwise
    return Profile(
        name,
        memory,
        frozen_map(selector),
        tuple(frozen_map(t) for t in tolerations),
        node_labels=frozen_map(labels),
    )


def _promises_more(
    doc: PolicyDocument, written: Any, memory: int, selector: dict[str, str], path: str
) -> None:
    """A warning when the nodeSelector picks nodes by a memory label (as nodes carry it) of
    less memory than the class promises: a pod asking more than the GPU holds would be sent
    there. Less is only a warning: the label may round what the GPU reports."""
    for key, pattern in ((MEM_LABEL, MEM_VALUE), (GFD_MEMORY_LABEL, GFD_MEMORY_VALUE)):
        match = pattern.fullmatch(selector.get(key, ""))
        if match is None:
            continue
        have = int(match[match.lastindex or 0])
        if have < memory:
            shown = shorten(str(written))
            shown = shown if shown == f"{memory}Mi" else f"{shown} ({memory}Mi)"
            doc.warn(
                f"{path}.memory",
                f"{shown} is more than the {have}Mi of the GPUs "
                f"its nodeSelector selects ({key}={selector[key]}): a pod asking up to "
                f"{memory}Mi would get {have}Mi; write memory: {have}Mi, or select nodes "
                "with that much",
            )


def _duplicates(doc: PolicyDocument, profiles: list[Profile | None]) -> None:
    """One error per class that repeats an earlier one's name, selector, or both.

    Equal memory is allowed (a P4-2Q and a T4-2Q are both 2 GiB): the listed order breaks
    the tie, since the classes are sorted by memory with a stable sort.
    """
    names: dict[str, int] = {}
    selectors: dict[tuple[tuple[str, str], ...], int] = {}
    for index, profile in enumerate(profiles):
        if profile is None:
            continue
        selector = tuple(sorted(profile.node_selector.items()))
        same_name, same_selector = names.get(profile.name), selectors.get(selector)
        where = f"spec.profiles[{index}]"
        if same_name is not None and same_name == same_selector:
            doc.error(
                where,
                f"repeats spec.profiles[{same_name}] (name {profile.name}, nodeSelector "
                f"{profile.selector_text}); remove one of them",
            )
        else:
            if same_name is not None:
                doc.error(
                    f"{where}.name",
                    f"{profile.name!r} is already the name of spec.profiles[{same_name}]; "
                    f"give each class its own name",
                )
            if same_selector is not None:
                doc.error(
                    f"{where}.nodeSelector",
                    f"{profile.selector_text} already selects the nodes of "
                    f"spec.profiles[{same_selector}]; give each class its own nodeSelector",
                )
        names.setdefault(profile.name, index)
        selectors.setdefault(selector, index)


def _ties(doc: PolicyDocument, profiles: list[Profile | None]) -> None:
    """A warning for each class whose memory an earlier one has, with `placement: exact`: the
    earlier one is the best fit of every ask that fits both, so only pins reach the later."""
    first: dict[int, int] = {}
    for index, profile in enumerate(profiles):
        if profile is None:
            continue
        earlier = first.setdefault(profile.memory_mib, index)
        if earlier != index:
            other = profiles[earlier]
            assert other is not None  # only loaded classes are remembered
            doc.warn(
                f"spec.profiles[{index}]",
                f"{profile.name} has the memory of spec.profiles[{earlier}] {other.name} "
                f"({profile.memory_mib}Mi), which is listed first and so the best fit wherever "
                f"{profile.name} would be: only pods that pin {profile.name} reach its nodes; "
                "set spec.placement: spillOver to use both",
            )


def load_profiles(doc: PolicyDocument, raw: Any, placement: Placement) -> tuple[Profile, ...]:
    """The classes of `spec.profiles`, ascending memory; errors and warnings go to `doc`."""
    if not isinstance(raw, list) or not raw:
        doc.error("spec.profiles", "must list at least one lightweight GPU class")
        return ()
    profiles = [_profile(doc, item, f"spec.profiles[{i}]") for i, item in enumerate(raw)]
    _duplicates(doc, profiles)
    if placement == "exact":
        _ties(doc, profiles)
    return tuple(sorted((p for p in profiles if p is not None), key=lambda p: p.memory_mib))
