"""What the benchmark compares between the stored pods of two variants."""

from __future__ import annotations

import copy
from typing import Any

from tools.bench.variants import differences

POD: dict[str, Any] = {
    "metadata": {"name": "cuda-sample", "annotations": {"lwgpu.io/profile": "GRID-P4-2Q"}},
    "spec": {
        "containers": [{"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "nodeSelector": {"aliyun.accelerator/nvidia_mem": "2048MiB"},
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
    },
}


def test_the_same_rewrite_differs_in_nothing() -> None:
    assert differences(POD, copy.deepcopy(POD)) == []


def test_each_decided_part_that_differs_is_named() -> None:
    other = copy.deepcopy(POD)
    other["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": "1"}
    del other["metadata"]["annotations"]
    other["metadata"]["name"] = "another"  # not decided by the rewrite: not compared
    assert differences(POD, other) == ["resources", "annotations"]
