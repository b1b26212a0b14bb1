"""NodeTally (webhook/kube/node_tally.py) against what NodeInventory did before it: hold every
listed Node's labels per label selector, merge the lists in order as dicts, and run
`profiles_from_labels` over all of them on each event. On random lists and watch events the
classes from the tally's distinct values are the same, and an event the tally calls no change
leaves them as they were (the inventory then keeps its snapshot)."""

from hypothesis import given
from hypothesis import strategies as st

from tests.scheduling.strategies import NODE_LABELS
from webhook.kube.node_tally import NodeTally
from webhook.scheduling import MEMORY_LABELS, class_labels, profiles_from_labels

NAMES = st.sampled_from(["a", "b", "c", "d"])
LISTS = st.sampled_from(MEMORY_LABELS)
EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("list"), LISTS, st.dictionaries(NAMES, NODE_LABELS, max_size=4)),
        st.tuples(st.just("put"), LISTS, NAMES, NODE_LABELS),
        st.tuples(st.just("drop"), LISTS, NAMES),
    ),
    max_size=30,
)


@given(EVENTS)
def test_the_tally_gives_the_classes_of_every_node_held(events):
    tally, held = NodeTally(MEMORY_LABELS), {key: {} for key in MEMORY_LABELS}
    before = profiles_from_labels({})
    for kind, key, *rest in events:
        if kind == "list":
            changed = tally.replace(key, rest[0].items())
            held[key] = dict(rest[0])
        elif kind == "put":
            changed = tally.put(key, *rest)
            held[key][rest[0]] = rest[1]
        else:
            changed = tally.drop(key, rest[0])
            held[key].pop(rest[0], None)
        merged = {name: labels for nodes in held.values() for name, labels in nodes.items()}
        expected = profiles_from_labels(merged)
        distinct = {tuple(sorted(d.items())) for d in tally.distinct().values()}
        assert distinct == {class_labels(labels) for labels in merged.values()}
        assert profiles_from_labels(tally.distinct()) == expected
        if not changed:
            assert expected == before
        before = expected


def test_alike_nodes_share_one_value():
    """15,000 alike Nodes hold one tuple of labels, not one each."""
    tally = NodeTally(MEMORY_LABELS)
    labels = {"aliyun.accelerator/nvidia_mem": "2048MiB", "kubernetes.io/hostname": "x"}
    assert tally.replace(MEMORY_LABELS[0], ((f"n{i}", dict(labels)) for i in range(100)))
    held = tally._held[MEMORY_LABELS[0]]
    assert len({id(value) for value in held.values()}) == 1
    assert list(tally.distinct().values()) == [{"aliyun.accelerator/nvidia_mem": "2048MiB"}]
    # a label no class reads changes nothing
    assert not tally.put(MEMORY_LABELS[0], "n1", {**labels, "kubernetes.io/hostname": "y"})
    assert not tally.drop(MEMORY_LABELS[0], "n2")
    assert tally.replace(MEMORY_LABELS[0], [])
    assert tally.distinct() == {} and tally._shared == {}
