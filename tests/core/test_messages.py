"""The words of the decision's messages (issue 18, "Messages"), over real corpus manifests.

Each case edits a copy of one corpus document the way a user gets it wrong (a capital
`True` for `lwgpu.io/skip`, an annotation on the Deployment instead of its pod template,
`nvidia.com/gpumem: 2Gi`, a container name that is not there) and decides it under a
shipped policy. The outcomes, reasons and warnings are kept together in
`tests/golden/messages/decision.txt`, so a change of wording shows as one diff; each case
also names the words its message must hold, which fail on their own.

The `as-admitted` cases decide the document as the apiserver hands it to the webhook
(`webhook.api.decoding.as_decoded`: `nvidia.com/gpumem: 3000` arrives as `3k`, a Pod's limits
copied to its requests): every amount is still worded in the resource's own unit (`3000`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.golden import check_golden
from tests.support.manifests import documents
from tests.support.paths import CORPUS, EXAMPLE_POLICIES
from tests.support.policies import default_policy
from webhook.api.decoding import as_decoded
from webhook.core.decision import Decision, decide
from webhook.files import load_policies
from webhook.policy import Policy

GOLDEN = Path(__file__).parents[1] / "golden" / "messages" / "decision.txt"
BINPACK = "AliyunContainerService__gpushare-scheduler-extender__samples__1.yaml"  # Deployment
BINPACK_16G = "AliyunContainerService__gpushare-scheduler-extender__samples__4.yaml"
HAMI = "Project-HAMi__HAMi__examples__nvidia__default_use.yaml"  # Pod, nvidia.com/gpumem: 3000
MIXED = EXAMPLE_POLICIES / "mixed-fleet.yaml"


def corpus(name: str) -> dict[str, Any]:
    """A copy of the first document of a corpus file, free to edit."""
    return copy.deepcopy(documents(CORPUS / name)[0].body)


def mixed_fleet() -> Policy:
    """The shipped mixed-fleet example (`wholeGPUPods: avoidLightweight`)."""
    policy = load_policies(MIXED).for_namespace("default")
    assert policy is not None
    return policy


def ignoring() -> Policy:
    """The shipped policy with `whenNoProfileFits: ignore`."""
    return replace(default_policy(), when_no_profile_fits="ignore")


def no_skipping() -> Policy:
    """The shipped policy with `allowSkip: false`."""
    return replace(default_policy(), allow_skip=False)


def template_annotation(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit: set annotation `key` on the pod template."""

    def edit(obj: dict[str, Any]) -> None:
        meta = obj["spec"]["template"].setdefault("metadata", {})
        meta.setdefault("annotations", {})[key] = value

    return edit


def own_annotation(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit: set annotation `key` on the object's own metadata."""

    def edit(obj: dict[str, Any]) -> None:
        obj["metadata"].setdefault("annotations", {})[key] = value

    return edit


def both(*edits: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Several edits, in order."""

    def edit(obj: dict[str, Any]) -> None:
        for one in edits:
            one(obj)

    return edit


def no_resources(obj: dict[str, Any]) -> None:
    """An edit: the Deployment's container asks nothing itself."""
    del obj["spec"]["template"]["spec"]["containers"][0]["resources"]


def limits(**values: Any) -> Callable[[dict[str, Any]], None]:
    """An edit: the Pod's first container's limits (`_` in a name stands for `/`, `__` `.`);
    None removes the resource."""

    def edit(obj: dict[str, Any]) -> None:
        found = obj["spec"]["containers"][0]["resources"]["limits"]
        for key, value in values.items():
            resource = key.replace("__", ".").replace("_", "/")
            if value is None:
                del found[resource]
            else:
                found[resource] = value

    return edit


def requests(**values: Any) -> Callable[[dict[str, Any]], None]:
    """An edit: the Pod's first container's requests, named as `limits` names them."""

    def edit(obj: dict[str, Any]) -> None:
        found = obj["spec"]["containers"][0]["resources"].setdefault("requests", {})
        for key, value in values.items():
            found[key.replace("__", ".").replace("_", "/")] = value

    return edit


def admitted(obj: dict[str, Any]) -> None:
    """An edit: the object as the apiserver hands it to the webhook (decoded, defaulted)."""
    decoded = as_decoded(obj)
    obj.clear()
    obj.update(decoded)


SKIP = "lwgpu.io/skip"
MEMORY = "lwgpu.io/gpu-memory"
CONTAINER = "lwgpu.io/container"

# (id, corpus file, edit, policy, outcome, words the reason or a warning must hold)
CASES: list[tuple[str, str, Callable[[dict[str, Any]], None], Callable[[], Policy], str, str]] = [
    ("skip-True", BINPACK, template_annotation(SKIP, "True"), default_policy, "skipped", '"True"'),
    ("skip-1", BINPACK, template_annotation(SKIP, "1"), default_policy, "skipped", '"1"'),
    ("skip-false", BINPACK, template_annotation(SKIP, "False"), default_policy, "mutated", "->"),
    (
        "skip-yes",
        BINPACK,
        template_annotation(SKIP, "yes"),
        default_policy,
        "mutated",
        "ignored lwgpu.io/skip: 'yes' (not true or false); write \"true\" to skip",
    ),
    (
        "skip-unquoted",
        BINPACK,
        template_annotation(SKIP, True),
        default_policy,
        "mutated",
        'ignored lwgpu.io/skip: true (not a string); write "true", quoted, to skip',
    ),
    (
        "skip-on-deployment",
        BINPACK,
        own_annotation(SKIP, "true"),
        default_policy,
        "skipped",
        "lwgpu.io/skip on the Deployment skips it but not its pods",
    ),
    (
        "skip-not-allowed",
        BINPACK,
        template_annotation(SKIP, "true"),
        no_skipping,
        "mutated",
        "ignored lwgpu.io/skip: policy 'default' sets allowSkip: false",
    ),
    (
        "skip-on-deployment-not-allowed",
        BINPACK,
        own_annotation(SKIP, "1"),
        no_skipping,
        "mutated",
        "ignored lwgpu.io/skip on the Deployment's metadata: policy 'default' sets allowSkip",
    ),
    (
        "skip-false-not-allowed",
        BINPACK,
        template_annotation(SKIP, "false"),
        no_skipping,
        "mutated",
        "->",
    ),
    (
        "memory-on-deployment",
        BINPACK,
        both(no_resources, own_annotation(MEMORY, "1536Mi")),
        default_policy,
        "skipped",
        "lwgpu.io/gpu-memory on the Deployment's metadata is ignored; set it in the pod template's",
    ),
    (
        "memory-on-both",
        BINPACK,
        both(
            no_resources,
            own_annotation(MEMORY, "1536Mi"),
            template_annotation(MEMORY, "1536Mi"),
        ),
        default_policy,
        "mutated",
        "lwgpu.io/gpu-memory=1536Mi (1536Mi) -> nvidia.com/gpu=1 on GRID-P4-2Q",
    ),
    (
        "container-on-deployment",
        BINPACK,
        own_annotation(CONTAINER, "binpack-1"),
        default_policy,
        "mutated",
        "lwgpu.io/container on the Deployment's metadata is ignored",
    ),
    (
        "gpumem-2Gi",
        HAMI,
        limits(nvidia__com_gpumem="2Gi"),
        default_policy,
        "denied",
        "spec.containers[0].resources: nvidia.com/gpumem counts MiB, so for 2Gi write "
        "nvidia.com/gpumem: 2048; containers[0] (ubuntu-container) asks nvidia.com/gpumem=2Gi, "
        "read as 2147483648Mi, more than the largest lightweight GPU GRID-P4-8Q (8192Mi)",
    ),
    (
        "gpumem-2G",
        HAMI,
        limits(nvidia__com_gpumem="2G"),
        default_policy,
        "denied",
        "for 2G write the annotation lwgpu.io/gpu-memory: 2G instead",
    ),
    (
        "gpumem-2Gi-ignored",
        HAMI,
        limits(nvidia__com_gpumem="2Gi"),
        ignoring,
        "allowed",
        "lwgpu: nvidia.com/gpumem counts MiB, so for 2Gi write nvidia.com/gpumem: 2048; left "
        "unchanged: fits no lightweight GPU",
    ),
    (
        "too-big-lightweight-only",
        BINPACK_16G,
        lambda obj: None,
        default_policy,
        "denied",
        "ask for at most aliyun.com/gpu-mem: 8 (units of 1Gi)",
    ),
    (
        "too-big-mixed-fleet",
        BINPACK_16G,
        lambda obj: None,
        mixed_fleet,
        "denied",
        "(units of 1Gi), or ask nvidia.com/gpu for a full GPU node instead",
    ),
    (
        "as-admitted-3000",
        HAMI,
        admitted,
        default_policy,
        "mutated",
        "nvidia.com/gpumem=3000 (3000Mi) -> nvidia.com/gpu=1 on GRID-P4-4Q",
    ),
    (
        "as-admitted-16000-too-big",
        HAMI,
        both(limits(nvidia__com_gpumem=16000), admitted),
        default_policy,
        "denied",
        "asks nvidia.com/gpumem=16000 (16000Mi), more than the largest lightweight GPU "
        "GRID-P4-8Q (8192Mi) of policy 'default'; ask for at most nvidia.com/gpumem: 8192",
    ),
    (
        "as-admitted-16000-ignored",
        HAMI,
        both(limits(nvidia__com_gpumem=16000), admitted),
        ignoring,
        "allowed",
        "lwgpu: nvidia.com/gpumem=16000 (16000Mi) fits no lightweight GPU; left unchanged",
    ),
    (
        "as-admitted-limits-requests-differ",
        HAMI,
        both(requests(nvidia__com_gpumem=2000), admitted),
        default_policy,
        "denied",
        "limits[nvidia.com/gpumem]=3000 and requests[nvidia.com/gpumem]=2000 differ",
    ),
    (
        "as-admitted-half-a-gpu",
        HAMI,
        both(limits(nvidia__com_gpumem=None, nvidia__com_gpu=0.5), admitted),
        default_policy,
        "denied",
        "limits[nvidia.com/gpu]: 0.5 is not a whole number of devices",
    ),
    (
        "no-such-container",
        HAMI,
        both(
            limits(nvidia__com_gpumem=None),
            own_annotation(MEMORY, "1536Mi"),
            own_annotation(CONTAINER, "ubuntu"),
        ),
        default_policy,
        "denied",
        "no container is named 'ubuntu'; name one of the pod's containers (ubuntu-container)",
    ),
]


def _decided(name: str, edit: Callable[[dict[str, Any]], None], policy: Policy) -> Decision:
    obj = corpus(name)
    edit(obj)
    return decide(obj, policy)


def _text(case_id: str, decision: Decision) -> str:
    lines = [case_id, f"    {decision.outcome}  {decision.reason or '-'}"]
    lines += [f"    warning  {w}" for w in decision.warnings]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("name", "edit", "policy", "outcome", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_message(name, edit, policy, outcome, words):
    """Each case gets its outcome, and its reason or one of its warnings says the words."""
    decision = _decided(name, edit, policy())
    assert decision.outcome == outcome, decision
    assert any(words in text for text in (decision.reason, *decision.warnings)), decision


def test_messages_golden():
    """Every case's outcome, reason and warnings, as tests/golden/messages/decision.txt."""
    text = "\n".join(
        _text(case_id, _decided(name, edit, policy()))
        for case_id, name, edit, policy, _, _ in CASES
    )
    check_golden(GOLDEN, text)
