"""A new user's first hour (issue 32): every silent failure made loud, every message naming
what the user wrote. Each case is a pod as a user gets it wrong, decided under the shipped
policy (or a variant); outcomes, reasons and warnings are kept together in
`tests/golden/messages/first-hour.txt`, and each case names the words its message must hold.

- A GPU resource no policy reads that looks like one it does (`aliyun.com/gpumem`) is said,
  with a did-you-mean; "asks for no GPU" only where the pod names no GPU resource at all.
- A rewritten pod loses the known companion resources (HAMi's, ACK cGPU's) and is warned
  about any other GPU resource it still asks.
- A pin by `nvidia_name` is quoted as written, and the fix given in the same label key.
- A size where a count belongs (`aliyun.com/gpu-mem: 2Gi`) leads with what to write; a count
  too small to be meant (`nvidia.com/gpumem: 4`) is warned about; an unrendered Helm template
  says so.
- A pod left alone by `whenNoProfileFits: ignore`, or already rewritten, has a reason.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import container, gpu_mem, pod
from tests.support.golden import check_golden
from tests.support.policies import default_policy
from webhook.core.decision import Decision, decide
from webhook.policy import Policy

GOLDEN = Path(__file__).parents[1] / "golden" / "messages" / "first-hour.txt"
NAME = "aliyun.accelerator/nvidia_name"
TEMPLATE = "{{ .Values.gpuMemory }}"


def limits(**values: Any) -> dict[str, Any]:
    """A pod whose one container has these limits (`_` stands for `/`, `__` for `.`, `___` for
    `-`)."""
    named = {
        k.replace("___", "-").replace("__", ".").replace("_", "/"): v for k, v in values.items()
    }
    return pod(container(limits=named))


def ignoring() -> Policy:
    return replace(default_policy(), when_no_profile_fits="ignore")


def required(*expressions: dict[str, Any]) -> dict[str, Any]:
    term = {"matchExpressions": list(expressions)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


REWRITTEN = decide(
    pod(container(), annotations={"lwgpu.io/gpu-memory": "1536Mi"}), default_policy()
).obj

# (id, object, policy, outcome, words the reason or a warning must hold)
CASES: list[tuple[str, dict[str, Any], Any, str, str]] = [
    (
        "typo-gpumem",
        limits(aliyun__com_gpumem=3),
        default_policy,
        "skipped",
        "lwgpu: containers[0] (cuda) asks aliyun.com/gpumem, unknown to lwgpu; did you mean "
        "aliyun.com/gpu-mem?",
    ),
    (
        "typo-gpu-memory",
        limits(aliyun__com_gpu___memory=3),
        default_policy,
        "skipped",
        "asks no GPU resource that policy 'default' reads (it names aliyun.com/gpu-memory)",
    ),
    (
        "typo-gpu-mem",
        limits(nvidia__com_gpu___mem=3000),
        default_policy,
        "skipped",
        "did you mean nvidia.com/gpumem?",
    ),
    ("no-gpu", limits(cpu="1"), default_policy, "skipped", "asks for no GPU"),
    (
        "another-vendors-gpu",
        limits(amd__com_gpu=1),
        default_policy,
        "skipped",
        "asks no GPU resource that policy 'default' reads (it names amd.com/gpu)",
    ),
    (
        "typo-beside-whole-gpu",
        limits(nvidia__com_gpu=1, nvidia__com_gpumem___percent=50),
        default_policy,
        "allowed",
        "asks nvidia.com/gpumem-percent, unknown to lwgpu; did you mean "
        "nvidia.com/gpumem-percentage?",
    ),
    (
        "companion-cgpu-removed",
        limits(aliyun__com_gpu___mem=2, **{"aliyun__com_gpu___core.percentage": 30}),
        default_policy,
        "mutated",
        "aliyun.com/gpu-mem=2 (2048Mi) -> nvidia.com/gpu=1 on GRID-P4-2Q",
    ),
    (
        "companions-hami-removed",
        limits(
            nvidia__com_gpumem=3000, nvidia__com_gpumem___percentage=50, nvidia__com_gpucores=30
        ),
        default_policy,
        "mutated",
        "nvidia.com/gpumem=3000 (3000Mi) -> nvidia.com/gpu=1 on GRID-P4-4Q",
    ),
    (
        "leftover-unknown",
        limits(aliyun__com_gpu___mem=2, example__com_gpu___slices=2),
        default_policy,
        "mutated",
        "lwgpu: containers[0] (cuda) keeps example.com/gpu-slices, which no lightweight node "
        "offers; remove it",
    ),
    (
        "leftover-companion-beside",
        pod(gpu_mem(2), container("side", limits={"nvidia.com/gpucores": 20})),
        default_policy,
        "mutated",
        "containers[1] (side) keeps nvidia.com/gpucores, which no lightweight node offers",
    ),
    (
        "leftover-typo",
        limits(aliyun__com_gpu___mem=2, nvidia__com_gpu___cores=30),
        default_policy,
        "mutated",
        "lwgpu: containers[0] (cuda) keeps nvidia.com/gpu-cores: did you mean "
        "nvidia.com/gpucores? No lightweight node offers it",
    ),
    (
        "pin-by-name",
        pod(gpu_mem(4), node_selector={NAME: "GRID-P4-2Q"}),
        default_policy,
        "denied",
        "spec.nodeSelector: nodeSelector aliyun.accelerator/nvidia_name=GRID-P4-2Q pins "
        "GRID-P4-2Q (2048Mi), but containers[0] (cuda) asks aliyun.com/gpu-mem=4 (4096Mi); "
        "remove the selector or pin GRID-P4-4Q (aliyun.accelerator/nvidia_name=GRID-P4-4Q)",
    ),
    (
        "pin-by-name-affinity",
        pod(
            gpu_mem(4),
            affinity=required(
                {"key": NAME, "operator": "In", "values": ["GRID-P4-2Q", "GRID-P4-1Q"]}
            ),
        ),
        default_policy,
        "denied",
        "spec.affinity: required node affinity aliyun.accelerator/nvidia_name In [GRID-P4-2Q, "
        "GRID-P4-1Q] pins GRID-P4-1Q, GRID-P4-2Q (at most 2048Mi)",
    ),
    (
        "pin-unknown-name",
        pod(gpu_mem(2), node_selector={NAME: "Tesla-T4"}),
        default_policy,
        "denied",
        "spec.nodeSelector: nodeSelector aliyun.accelerator/nvidia_name=Tesla-T4 matches no "
        "lightweight GPU class of policy 'default'",
    ),
    (
        "size-for-a-count",
        pod(gpu_mem("2Gi")),
        default_policy,
        "denied",
        "spec.containers[0].resources: aliyun.com/gpu-mem counts GiB, so for 2Gi write "
        "aliyun.com/gpu-mem: 2; containers[0] (cuda) asks aliyun.com/gpu-mem=2Gi, read as "
        "2199023255552Mi",
    ),
    (
        "size-for-a-count-ignored",
        pod(gpu_mem("2Gi")),
        ignoring,
        "allowed",
        "lwgpu: aliyun.com/gpu-mem counts GiB, so for 2Gi write aliyun.com/gpu-mem: 2; left "
        "unchanged: fits no lightweight GPU",
    ),
    (
        "too-small-to-be-meant",
        limits(nvidia__com_gpumem=4),
        default_policy,
        "mutated",
        "lwgpu: containers[0] (cuda): nvidia.com/gpumem=4 is 4Mi (it counts MiB); for 4Gi write "
        "nvidia.com/gpumem: 4096",
    ),
    (
        "small-but-meant",
        limits(nvidia__com_gpumem=300),
        default_policy,
        "mutated",
        "nvidia.com/gpumem=300 (300Mi) -> nvidia.com/gpu=1 on GRID-P4-1Q",
    ),
    (
        "unrendered-resource",
        limits(aliyun__com_gpu___mem=TEMPLATE),
        default_policy,
        "denied",
        "spec.containers[0].resources.limits[aliyun.com/gpu-mem]: '{{ .Values.gpuMemory }}' "
        "looks like an unrendered Helm template: render it first (`helm template RELEASE CHART "
        "| lwgpu review -`)",
    ),
    (
        "unrendered-annotation",
        pod(annotations={"lwgpu.io/gpu-memory": TEMPLATE + "Mi"}),
        default_policy,
        "denied",
        "metadata.annotations[lwgpu.io/gpu-memory]: '{{ .Values.gpuMemory }}Mi' looks like an "
        "unrendered Helm template",
    ),
    (
        "unrendered-gpu-count",
        limits(nvidia__com_gpu=TEMPLATE),
        default_policy,
        "denied",
        "spec.containers[0].resources.limits[nvidia.com/gpu]: '{{ .Values.gpuMemory }}' looks "
        "like an unrendered Helm template",
    ),
    (
        "ignored-has-a-reason",
        pod(gpu_mem(16)),
        ignoring,
        "allowed",
        "containers[0] (cuda) asks aliyun.com/gpu-mem=16 (16384Mi), more than the largest "
        "lightweight GPU GRID-P4-8Q (8192Mi) of policy 'default'; left unchanged "
        "(whenNoProfileFits: ignore)",
    ),
    ("already-rewritten", REWRITTEN, default_policy, "allowed", "already rewritten for GRID-P4-2Q"),
]


def _text(case_id: str, decision: Decision) -> str:
    lines = [case_id, f"    {decision.outcome}  {decision.reason or '-'}"]
    lines += [f"    warning  {w}" for w in decision.warnings]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("obj", "policy", "outcome", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_message(obj, policy, outcome, words):
    """Each case gets its outcome, and its reason or one of its warnings says the words."""
    decision = decide(obj, policy())
    assert decision.outcome == outcome, decision
    assert any(words in text for text in (decision.reason, *decision.warnings)), decision


def test_messages_golden():
    """Every case's outcome, reason and warnings, as tests/golden/messages/first-hour.txt."""
    text = "\n".join(_text(case_id, decide(obj, policy())) for case_id, obj, policy, _, _ in CASES)
    check_golden(GOLDEN, text)


@pytest.mark.parametrize(
    "removed",
    [
        ("aliyun.com/gpu-core.percentage",),
        ("nvidia.com/gpumem-percentage", "nvidia.com/gpucores"),
    ],
)
def test_known_companions_go_with_the_memory_ask(removed):
    """A lightweight node offers `nvidia.com/gpu` alone: a share kept would leave it Pending."""
    asked = {"aliyun.com/gpu-mem": "2", **dict.fromkeys(removed, "30")}
    decision = decide(pod(container(limits=asked, requests=asked)), default_policy())
    resources = decision.obj["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    assert decision.warnings == (decision.warnings[0],), "no leftover to warn about"
