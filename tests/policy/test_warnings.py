"""What a policy says that loads but is likely not meant (`policy check` prints a warning and
exits 0), and errors worded in YAML's words, never Python's (issue 32, items 10 and 13).
"""

from __future__ import annotations

import re

import pytest

from tests.support.cli import run_cli
from webhook.policy import load_documents

HEAD = "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\nmetadata: {name: p}\nspec:\n"
TIE = HEAD + (
    "  profiles:\n"
    "  - {name: GRID-P4-2Q, memory: 2Gi, nodeSelector: {NAME: GRID-P4-2Q}}\n"
    "  - {name: T4-2Q, memory: 2Gi, nodeSelector: {NAME: T4-2Q}}\n"
).replace("NAME", "aliyun.accelerator/nvidia_name")

# (id, policy text, the warnings `policy check` prints after its `ok:` line, file name left out)
CASES = [
    (
        "nvidia_mem-in-GiB",
        HEAD + "  profiles: [{name: A, memory: 2Gi, nodeSelector: "
        "{aliyun.accelerator/nvidia_mem: 2GiB}}]\n",
        [
            "#0: spec.profiles[0].nodeSelector.aliyun.accelerator/nvidia_mem: '2GiB' is not how "
            "nodes carry their GPU memory ('<MiB>MiB', as nvidia-smi prints it), so no node "
            "matches it; write 2048MiB"
        ],
    ),
    (
        "nvidia_mem-no-unit-in-nodeLabels",
        HEAD + "  profiles: [{name: A, memory: 2Gi, nodeSelector: {aliyun.accelerator/nvidia_name: "
        "A}, nodeLabels: {aliyun.accelerator/nvidia_mem: '2048'}}]\n",
        [
            "#0: spec.profiles[0].nodeLabels.aliyun.accelerator/nvidia_mem: '2048' is not how "
            "nodes carry their GPU memory ('<MiB>MiB', as nvidia-smi prints it), so no node "
            "matches it; write 2048MiB"
        ],
    ),
    (
        "gpu.memory-with-a-unit",
        HEAD + "  profiles: [{name: A, memory: 4Gi, nodeSelector: "
        "{nvidia.com/gpu.memory: 4096MiB}}, {name: B, memory: 2Gi, nodeSelector: "
        "{nvidia.com/gpu.memory: 2Gi}}]\n",
        [
            f"#0: spec.profiles[{i}].nodeSelector.nvidia.com/gpu.memory: '{v}' is not how nodes "
            "carry their GPU memory (MiB as an integer, as GPU Feature Discovery writes it), so "
            f"no node matches it; write {mib}"
            for i, v, mib in ((0, "4096MiB", 4096), (1, "2Gi", 2048))
        ],
    ),
    (
        "class-promises-more-than-its-nodes-have",
        HEAD + "  profiles: [{name: A, memory: 4Gi, nodeSelector: "
        "{aliyun.accelerator/nvidia_mem: 2048MiB}}, {name: B, memory: 8192Mi, nodeSelector: "
        "{nvidia.com/gpu.memory: '7680'}}, {name: C, memory: 1Gi, nodeSelector: "
        "{aliyun.accelerator/nvidia_mem: 2048MiB, aliyun.accelerator/nvidia_name: C}}]\n",
        [
            "#0: spec.profiles[0].memory: 4Gi (4096Mi) is more than the 2048Mi of the GPUs its "
            "nodeSelector selects (aliyun.accelerator/nvidia_mem=2048MiB): a pod asking up to "
            "4096Mi would get 2048Mi; write memory: 2048Mi, or select nodes with that much",
            "#0: spec.profiles[1].memory: 8192Mi is more than the 7680Mi of the GPUs its "
            "nodeSelector selects (nvidia.com/gpu.memory=7680): a pod asking up to 8192Mi would "
            "get 7680Mi; write memory: 7680Mi, or select nodes with that much",
        ],
    ),
    (
        "gpu.memory-as-gfd-writes-it",
        HEAD + "  profiles: [{name: A, memory: 4Gi, nodeSelector: "
        "{nvidia.com/gpu.memory: '4096'}}]\n",
        [],
    ),
    (
        "tie-reachable-by-pins-only",
        TIE,
        [
            "#0: spec.profiles[1]: T4-2Q has the memory of spec.profiles[0] GRID-P4-2Q (2048Mi), "
            "which is listed first and so the best fit wherever T4-2Q would be: only pods that "
            "pin T4-2Q reach its nodes; set spec.placement: spillOver to use both"
        ],
    ),
    ("tie-with-spillOver", TIE + "  placement: spillOver\n", []),
    ("nvidia_mem-as-nodes-carry-it", HEAD + "  profiles: [{name: A, memory: 2Gi}]\n", []),
]


@pytest.mark.parametrize(("text", "warnings"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_check_warns_and_passes(tmp_path, text, warnings):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    code, out, _ = run_cli("policy", "check", str(path))
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("ok: ")
    assert lines[1:] == [f"warning: {path}{w}" for w in warnings]


SPEC_FIELDS = [
    "maxGPUsPerPod",
    "whenNoProfileFits",
    "discoverProfiles",
    "allowSkip",
    "placement",
    "wholeGPUPods",
    "namespaces",
    "memoryRequests",
    "leaveAlone",
    "profiles",
]
PROFILE_FIELDS = ["name", "memory", "nodeSelector", "nodeLabels", "tolerations"]
# Values YAML writes that Python would name otherwise: null, booleans, a list, a mapping.
VALUES = ["~", "true", "False", "[1, ~]", "{a: ~}", "'x'"]
PYTHON = re.compile(r"\b(None|True|False|NoneType|str|dict|int|float|bool)\b|\{'|\['")


def _documents():
    for value in VALUES:
        for field in SPEC_FIELDS:
            yield HEAD + f"  profiles: [{{name: A, memory: 1Gi}}]\n  {field}: {value}\n"
        for field in PROFILE_FIELDS:
            yield HEAD + f"  profiles: [{{name: A, memory: 1Gi, {field}: {value}}}]\n"
        yield HEAD + f"  profiles: [{{name: A, memory: 1Gi, nodeSelector: {{k: {value}}}}}]\n"
        yield HEAD + f"  profiles: [{{name: A, memory: 1Gi, tolerations: [{{key: {value}}}]}}]\n"
        yield HEAD + f"  memoryRequests: {{resources: {{a.io/gpu-mem: {value}}}}}\n"
        yield f"apiVersion: lwgpu.io/v1alpha1\nkind: {value}\n"
        yield value


def test_no_error_speaks_python():
    """Every error for a null, boolean, list or mapping where another value belongs says it as
    YAML does (`null (empty)`, `true`, `[1, null]`), never as Python (`None`, `NoneType`)."""
    errors: list[str] = []
    for text in _documents():
        load_documents(text, "p.yaml", errors)
    assert len(errors) > 60
    assert [e for e in errors if PYTHON.search(e.partition(": ")[2])] == []
