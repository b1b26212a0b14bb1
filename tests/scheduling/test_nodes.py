"""Node matching as the scheduler does it (`k8s.io/component-helpers/scheduling/corev1/
nodeaffinity`, `NodeSelector.Match` and `nodeSelectorRequirementsAsSelector`), and which
nodes discovery turns into classes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.paths import DATA
from webhook.offline.cluster import read_nodes
from webhook.scheduling import (
    pod_fits_node,
    profiles_from_labels,
    required_keys,
    requirement_met,
)

LABELS = {"aliyun.accelerator/nvidia_mem": "2048MiB", "gpus": "4", "zone": "a"}
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def spec(*terms, selector=None):
    """A pod spec with a nodeSelector and required node affinity terms (each a list)."""
    body = {"nodeSelector": selector} if selector is not None else {}
    if terms:
        body["affinity"] = {
            "nodeAffinity": {
                REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}
            }
        }
    return body


def req(key, operator, *values):
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("pod", "fits"),
    [
        (spec(), True),
        (spec(selector={"zone": "a"}), True),
        (spec(selector={"zone": "b"}), False),
        (spec(selector={"missing": ""}), False),  # a selector needs the label, even empty
        (spec([req("zone", "In", "a", "b")]), True),
        (spec([req("zone", "In", "b")]), False),
        (spec([req("absent", "In", "x")]), False),
        (spec([req("zone", "NotIn", "b")]), True),
        (spec([req("absent", "NotIn", "x")]), True),  # NotIn accepts a missing label
        (spec([req("zone", "Exists")]), True),
        (spec([req("absent", "Exists")]), False),
        (spec([req("absent", "DoesNotExist")]), True),
        (spec([req("zone", "DoesNotExist")]), False),
        (spec([req("gpus", "Gt", "2")]), True),
        (spec([req("gpus", "Lt", "2")]), False),
        (spec([req("aliyun.accelerator/nvidia_mem", "Gt", "1")]), False),  # not an integer
        (spec([req("zone", "Equals", "a")]), False),  # an unknown operator matches nothing
        (spec([req("zone", "In", "b")], [req("gpus", "Gt", "3")]), True),  # terms are ORed
        (spec([req("zone", "In", "a"), req("gpus", "Lt", "3")]), False),  # expressions ANDed
        (spec([]), False),  # an empty term matches no node
        ({"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}}, False),
        (spec([req("zone", "In", "a")], selector={"zone": "b"}), False),  # both must hold
    ],
)
def test_pod_fits_node(pod, fits):
    assert pod_fits_node(pod, LABELS) is fits


@pytest.mark.parametrize(
    ("operator", "bound", "label", "met"),
    [
        # labels.Requirement.Matches (k8s.io/apimachinery/pkg/labels/selector.go) reads both
        # sides of Gt and Lt with strconv.ParseInt(s, 10, 64): a sign, ASCII digits, 64 bits.
        ("Gt", "2", "4", True),
        ("Gt", "+2", "+4", True),
        ("Lt", "-2", "-4", True),
        ("Gt", "4", "4", False),
        ("Lt", "9223372036854775807", "-9223372036854775808", True),
        ("Gt", "1", "9223372036854775808", False),  # past 64 bits: ParseInt fails
        ("Gt", "--5", "4", False),
        ("Gt", "2", "4\n", False),
        ("Gt", "2", "\u0664", False),  # ARABIC-INDIC DIGIT FOUR: a digit to Python, not to Go
        ("Gt", "2", " 4", False),
        ("Gt", "2", "", False),
        ("Gt", "2", None, False),  # no such label
        ("Lt", "2", "2048MiB", False),
    ],
)
def test_gt_and_lt_compare_what_go_parses_as_an_int64(operator, bound, label, met):
    assert requirement_met(operator, [bound], label) is met


@pytest.mark.parametrize(
    ("pod", "keys"),
    [
        (spec(), set()),
        (spec(selector={"zone": "a"}), {"zone"}),
        (spec([req("zone", "In", "a")]), {"zone"}),
        (spec([req("zone", "Exists")]), {"zone"}),
        (spec([req("gpus", "Gt", "2"), req("zone", "Lt", "2")]), {"gpus", "zone"}),
        (spec([req("zone", "NotIn", "a")]), set()),
        (spec([req("zone", "DoesNotExist")]), set()),
        (spec([req("zone", "In", "a")], [req("gpus", "In", "4")]), set()),  # terms are ORed
        (spec([req("zone", "In", "a")], [req("zone", "Exists"), req("gpus", "Lt", "4")]), {"zone"}),
        (spec([req("zone", "DoesNotExist")], selector={"gpus": "4"}), {"gpus"}),
        (spec([]), set()),  # an empty term places no pod: read as requiring nothing
    ],
)
def test_required_keys(pod, keys):
    assert required_keys(pod) == keys


KEYS = ("zone", "gpus")
requirements = st.builds(
    req,
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.sampled_from(["1", "4", "a"]),
)
pods = st.builds(
    lambda terms, selector: spec(*terms, selector=selector),
    st.lists(st.lists(requirements, max_size=3), max_size=3),
    st.none() | st.dictionaries(st.sampled_from(KEYS), st.sampled_from(["1", "a"]), max_size=1),
)
node_labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(["1", "4", "a"]))


@given(pod=pods, labels=node_labels)
def test_every_node_a_pod_fits_carries_the_keys_it_requires(pod, labels):
    """What `leaveAlone.nodeSelectorKeys` rests on: a pod left alone for a key can only be
    placed on nodes that carry it."""
    assert not pod_fits_node(pod, labels) or required_keys(pod) <= labels.keys()


def test_discovery_takes_only_nodes_that_look_lightweight():
    """On the mixed fleet, the 4-GPU T4 pool and the ACK cGPU pool become no class."""
    nodes = {
        n: node.labels for n, node in read_nodes(str(DATA / "nodes" / "mixed-fleet.yaml")).items()
    }
    assert any(n.startswith("t4-full") for n in nodes) and any(n.startswith("cgpu") for n in nodes)
    found = profiles_from_labels(nodes)
    assert [(p.name, p.memory_mib) for p in found] == [
        (f"GRID-P4-{g}Q", g * 1024) for g in (1, 2, 4, 8)
    ]
    # With no other system's keys, a cGPU node is one GPU with its memory labelled.
    assert len(profiles_from_labels(nodes, sharing_keys=())) == len(found) + 1
