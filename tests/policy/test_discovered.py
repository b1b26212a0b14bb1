"""Discovered classes (from Node labels) merged into policies that set discoverProfiles."""

import pytest

from tests.support.builders import container, pod
from tests.support.paths import REPO
from webhook.core.decision import decide
from webhook.policy import PolicySet, Profile, frozen_map, load_documents

MEM = "aliyun.accelerator/nvidia_mem"


def discovered(name, mib, label=None):
    return Profile(name, mib, frozen_map({MEM: label or f"{mib}MiB"}))


def policies(discover):
    text = (REPO / "policies/default.yaml").read_text()
    text = text.replace("whenNoProfileFits: deny", f"discoverProfiles: {str(discover).lower()}")
    errors = []
    found = load_documents(text, "default.yaml", errors)
    assert errors == []
    return PolicySet(tuple(found))


TESLA = discovered("Tesla-P4", 7611)


@pytest.mark.parametrize(
    "discover, found, gib, outcome, selector",
    [
        (True, [TESLA], 5, "mutated", "7611MiB"),  # 5 GiB: 7611MiB is the smallest that holds it
        (True, [TESLA], 2, "mutated", "2048MiB"),  # static classes still fit smaller asks
        (True, [], 5, "mutated", "8192MiB"),  # the discovered class disappeared
        (False, [TESLA], 5, "mutated", "8192MiB"),  # discovery off: discovered classes ignored
        (True, [TESLA], 9, "denied", None),
        (True, [TESLA, discovered("A10", 24576)], 9, "mutated", "24576MiB"),
    ],
)
def test_discovered_classes_join_the_best_fit(discover, found, gib, outcome, selector):
    policy = policies(discover).with_discovered(found).for_namespace("default")
    decision = decide(pod(container(limits={"aliyun.com/gpu-mem": gib})), policy)
    assert decision.outcome == outcome
    if selector:
        assert decision.obj["spec"]["nodeSelector"] == {MEM: selector}


def test_a_discovered_class_with_a_static_selector_adds_nothing():
    base = policies(True)
    merged = base.with_discovered([discovered("GRID-P4-2Q-node", 2048)])
    assert merged.for_namespace("default").profiles == base.for_namespace("default").profiles
    assert base.with_discovered([]) is base
