"""Pods at the size cap: the patch stays near the size of what changed, and the pod stays valid.

A pod of thousands of containers that each ask GPU memory needs two operations per container
(remove the memory, add the GPU). `Editor.compact` sends one `replace` of the container list
when that is shorter; applying either patch (RFC 6902, with `jsonpatch`) gives the same pod.
The audit annotation is bounded so the rewritten pod stays within the apiserver's 256 KiB of
annotations (apimachinery/pkg/api/validation/objectmeta.go, ValidateAnnotationsSize).
"""

from __future__ import annotations

import copy

import jsonpatch
import orjson
import pytest

from tests.support.builders import container, pod
from tests.support.policies import default_policy
from webhook.core import rewrite
from webhook.core.decision import decide
from webhook.core.edit import Editor
from webhook.core.rewrite import MANY_ASKS

DEFAULT = default_policy()
ANNOTATIONS_LIMIT = 256 * 1024


def asking(count: int) -> dict:
    """A pod of one plain container and `count` init containers that each ask GPU memory."""
    asks = [container(f"c{n}", limits={"aliyun.com/gpu-mem": 2}) for n in range(count)]
    return pod(container("app"), init=tuple(asks))


@pytest.mark.parametrize("count", [1, MANY_ASKS - 1, MANY_ASKS, 5000])
def test_the_patch_gives_the_decided_pod_and_is_never_longer_than_needed(count, monkeypatch):
    # Init containers run one after another, so each may ask the pod's one GPU.
    obj = asking(count)
    before = copy.deepcopy(obj)
    decision = decide(obj, DEFAULT)
    assert decision.outcome == "mutated" and obj == before  # the input is never changed
    assert jsonpatch.apply_patch(before, list(decision.patch)) == decision.obj
    whole = [op for op in decision.patch if op["path"] == "/spec/initContainers"]
    monkeypatch.setattr(rewrite, "MANY_ASKS", 10**9)
    per_field = decide(obj, DEFAULT).patch
    if count < MANY_ASKS:  # few changes: one operation per field
        assert not whole and decision.patch == per_field
    else:  # many: the list once, shorter than the fields' operations
        assert len(whole) == 1 and whole[0]["op"] == "replace"
        assert len(orjson.dumps(decision.patch)) < len(orjson.dumps(per_field))


def test_a_list_longer_than_its_operations_is_patched_field_by_field():
    # Many asking containers among large ones: the whole list would repeat every member.
    obj = asking(MANY_ASKS)
    obj["spec"]["initContainers"][0]["env"] = [{"name": "X", "value": "x" * 100_000}]
    decision = decide(obj, DEFAULT)
    assert not [op for op in decision.patch if op["path"] == "/spec/initContainers"]
    assert jsonpatch.apply_patch(obj, list(decision.patch)) == decision.obj


def test_take_over_makes_later_edits_part_of_one_operation():
    edit = Editor({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}})
    edit.take_over(("spec", "containers"))
    edit.set(("spec", "containers", 1, "name"), "c")
    edit.remove(("spec", "containers", 0, "name"))
    assert edit.ops == [{"op": "replace", "path": "/spec/containers", "value": [{}, {"name": "c"}]}]


def test_the_audit_trail_of_40k_asks_keeps_the_pod_within_the_annotation_limit():
    decision = decide(asking(40_000), DEFAULT)
    annotations = decision.obj["spec"]["initContainers"] and decision.obj["metadata"]["annotations"]
    trail = annotations["lwgpu.io/rewritten-from"]
    assert len(trail) <= rewrite.AUDIT_LIMIT < ANNOTATIONS_LIMIT
    assert trail.startswith("c0:aliyun.com/gpu-mem=2,c1:aliyun.com/gpu-mem=2,")
    shown = trail.count("aliyun.com/gpu-mem=2")
    assert trail.endswith(f",... and {40_000 - shown} more")
    assert sum(len(k) + len(v) for k, v in annotations.items()) < ANNOTATIONS_LIMIT
